// The agent's local socket protocol: JSON lines from any local user. Each line goes through the
// same validation the agent applies (a JSON object with an op; lifecycle messages through
// parse_lifecycle), valid lifecycle messages are applied to a job table, and the table is then
// rebuilt from the same messages the way a restart replays the spool.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/node/job_table.h"
#include "common/error.h"
#include "common/json_read.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = triage::fuzz::as_view(data, size);
  triage::agent::JobTable table;
  std::map<uint64_t, std::vector<nlohmann::json>> spool;
  int64_t now = 1'795'262'400'000'000;
  size_t start = 0;
  while (start < input.size()) {
    size_t end = input.find('\n', start);
    if (end == std::string_view::npos) end = input.size();
    const std::string_view line = input.substr(start, end - start);
    start = end + 1;
    const nlohmann::json request = nlohmann::json::parse(line, nullptr, false);
    if (request.is_discarded() || !request.is_object()) continue;
    try {
      const triage::JsonObjectReader r(request, "request", "");
      const std::string op = r.str("op").value_or("");
      if (op == "get_job") {
        (void)r.u64("job_id");
        continue;
      }
      if (!triage::agent::is_lifecycle_op(op)) continue;
      const triage::agent::LifecycleMessage msg = triage::agent::parse_lifecycle(request);
      if (msg.job_id == 0 || msg.msg_id.empty()) std::abort();
      if (table.has_message(msg.job_id, msg.msg_id)) continue;
      now += 1000;
      table.apply(msg, now);
      spool[msg.job_id].push_back({{"r", "msg"}, {"m", msg.raw}, {"peer_uid", 0}, {"t", now}});
    } catch (const triage::InputError&) {
      // Answered with {"ok":false,"error":...}: the expected outcome for bad requests.
    }
  }
  (void)table.running_pids();
  triage::agent::JobTable restored;
  for (const auto& [job_id, records] : spool)
    restored.restore(job_id, records, now);
  if (restored.jobs().size() != table.jobs().size()) std::abort();
  return 0;
}
