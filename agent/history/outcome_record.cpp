#include "agent/history/outcome_record.h"

#include <stdexcept>

#include "common/hostlist.h"
#include "common/text.h"

namespace triage::agent {

namespace {

// A record travels inside a munge credential and sits in memory 10,000 times over: its free text
// is bounded.
constexpr size_t kMaxWhy = 240;
constexpr size_t kMaxImplicated = 32;
constexpr size_t kMaxShortField = 64;

std::optional<std::string> string_at(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

std::string bounded(std::string_view s, size_t max) {
  return printable(truncate_utf8(s, max));
}

// triage.json names the class as a string; older analyzers answered with an object.
std::optional<std::string> primary_class(const nlohmann::json& triage) {
  const auto it = triage.find("primary_failure");
  if (it == triage.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return string_at(*it, "class");
  return std::nullopt;
}

void implicate(std::vector<ImplicatedNode>& out, const std::string& node, const std::string& why,
               bool trusted) {
  for (ImplicatedNode& n : out) {
    if (n.node == node) {
      n.trusted = n.trusted || trusted;
      return;
    }
  }
  if (out.size() < kMaxImplicated) out.push_back({node, bounded(why, kMaxWhy), trusted});
}

// Nodes whose verdict counts against them, with the verdict's reasons.
void implicate_by_verdict(const nlohmann::json& triage, std::vector<ImplicatedNode>& out) {
  const auto nodes = triage.find("nodes");
  if (nodes == triage.end() || !nodes->is_array()) return;
  for (const nlohmann::json& n : *nodes) {
    if (!n.is_object()) continue;
    const auto host = string_at(n, "host");
    const auto verdict = string_at(n, "verdict");
    if (!host || !verdict || (*verdict != "drain-recommended" && *verdict != "degraded")) continue;
    std::string why;
    if (const auto r = n.find("verdict_reasons"); r != n.end() && r->is_array()) {
      for (const nlohmann::json& reason : *r) {
        if (reason.is_string()) why += (why.empty() ? "" : "; ") + reason.get<std::string>();
      }
    }
    if (why.empty()) why = *verdict;
    const auto from_agent = n.find("from_agent");
    implicate(out, *host, why,
              from_agent != n.end() && from_agent->is_boolean() && from_agent->get<bool>());
  }
}

// The host of a trusted finding of the primary class (a kernel line, a task's death).
void implicate_by_finding(const nlohmann::json& triage, const std::optional<std::string>& cls,
                          std::vector<ImplicatedNode>& out) {
  const auto findings = triage.find("findings");
  if (!cls || findings == triage.end() || !findings->is_array()) return;
  for (const nlohmann::json& f : *findings) {
    if (!f.is_object() || string_at(f, "class") != cls) continue;
    const auto trusted = f.find("trusted");
    if (trusted == f.end() || !trusted->is_boolean() || !trusted->get<bool>()) continue;
    const auto host = string_at(f, "host");
    if (!host || host->empty()) continue;
    std::string what = string_at(f, "text").value_or("");
    if (const auto c = f.find("captures"); c != f.end() && c->is_object()) {
      what = string_at(*c, "summary").value_or(what);
    }
    implicate(out, *host, *cls + ": " + what, true);
  }
}

std::optional<double> gpu_hours_lost(const nlohmann::json& triage, std::optional<int64_t> gpus) {
  const auto progress = triage.find("progress");
  if (!gpus || *gpus <= 0 || progress == triage.end() || !progress->is_object())
    return std::nullopt;
  const auto lost = progress->find("progress_lost_seconds");
  if (lost == progress->end() || !lost->is_number()) return std::nullopt;
  return lost->get<double>() * static_cast<double>(*gpus) / 3600.0;
}

std::optional<int64_t> integer_at(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

// How far the attempt got, from triage.json's progress (null when the log showed no step).
void progress_of(const nlohmann::json& triage, OutcomeRecord& r) {
  r.progress_known = true;
  const auto progress = triage.find("progress");
  if (progress == triage.end() || !progress->is_object()) return;
  r.last_step = integer_at(*progress, "last_step");
  r.last_checkpoint = integer_at(*progress, "resume_step");
  // Resuming from step 0 is starting afresh: no checkpoint was saved.
  if (r.last_checkpoint && *r.last_checkpoint <= 0) r.last_checkpoint.reset();
}

nlohmann::json optional_string(const std::optional<std::string>& s) {
  return s ? nlohmann::json(*s) : nlohmann::json(nullptr);
}

nlohmann::json with_nodes(const OutcomeRecord& r, nlohmann::json nodes) {
  nlohmann::json implicated = nlohmann::json::array();
  for (const ImplicatedNode& n : r.implicated)
    implicated.push_back({{"node", n.node}, {"why", n.why}, {"trusted", n.trusted}});
  nlohmann::json j = {
      {"v", kOutcomeRecordVersion},
      {"job_id", r.job_id},
      {"user", r.user},
      {"end_time", r.end_time},
      {"status", r.status},
      {"class", optional_string(r.cls)},
      {"blame", optional_string(r.blame)},
      {"nodes", std::move(nodes)},
      {"implicated", std::move(implicated)},
      {"gpu_hours_lost", r.gpu_hours_lost ? nlohmann::json(*r.gpu_hours_lost) : nullptr}};
  if (r.attempt) j["attempt"] = *r.attempt;
  if (r.progress_known) {
    j["last_step"] = r.last_step ? nlohmann::json(*r.last_step) : nullptr;
    j["last_checkpoint"] = r.last_checkpoint ? nlohmann::json(*r.last_checkpoint) : nullptr;
  }
  return j;
}

template <typename T>
T required(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) throw std::invalid_argument(std::string("missing \"") + key + "\"");
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument(std::string("\"") + key + "\" has the wrong type");
  }
}

std::optional<std::string> nullable_string(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_string())
    throw std::invalid_argument(std::string("\"") + key + "\" has the wrong type");
  return it->get<std::string>();
}

std::optional<int64_t> nullable_integer(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer())
    throw std::invalid_argument(std::string("\"") + key + "\" is not an integer");
  return it->get<int64_t>();
}

std::string nodelist_from(const nlohmann::json& nodes) {
  if (nodes.is_string()) {
    std::string list = nodes.get<std::string>();
    (void)expand_hostlist(list, "nodes");  // throws InputError when malformed
    return list;
  }
  if (!nodes.is_array()) throw std::invalid_argument("\"nodes\" has the wrong type");
  return compress_hostlist(nodes.get<std::vector<std::string>>());
}

}  // namespace

std::optional<int64_t> gpus_from_tres(const std::string& tres) {
  static constexpr std::string_view kGpu = "gres/gpu=";
  for (std::string_view item : split(tres, ',')) {
    item = trim(item);
    if (item.substr(0, kGpu.size()) != kGpu) continue;
    if (const auto n = parse_uint(item.substr(kGpu.size())); n && *n <= INT32_MAX)
      return static_cast<int64_t>(*n);
  }
  return std::nullopt;
}

std::vector<std::string> OutcomeRecord::nodes() const {
  return nodelist.empty() ? std::vector<std::string>{} : expand_hostlist(nodelist, "nodes");
}

OutcomeRecord build_outcome_record(const nlohmann::json& triage, const JobFacts& facts,
                                   std::optional<int64_t> gpus, int64_t now_sec) {
  static const nlohmann::json kNothing = nlohmann::json::object();
  const nlohmann::json& t = triage.is_object() ? triage : kNothing;
  OutcomeRecord r;
  r.job_id = facts.job_id;
  std::string user = facts.user;
  if (user.empty()) {
    if (const auto job = t.find("job"); job != t.end() && job->is_object())
      user = string_at(*job, "user").value_or("");
  }
  r.user = bounded(user, kMaxShortField);
  r.end_time = facts.end_time != 0 ? facts.end_time : now_sec;
  r.status = bounded(string_at(t, "status").value_or("unknown"), kMaxShortField);
  r.cls = primary_class(t);
  if (r.cls) r.cls = bounded(*r.cls, kMaxShortField);
  r.blame = string_at(t, "blame");
  if (r.blame) r.blame = bounded(*r.blame, kMaxShortField);
  r.nodelist = compress_hostlist(facts.nodes);
  implicate_by_verdict(t, r.implicated);
  implicate_by_finding(t, r.cls, r.implicated);
  r.gpu_hours_lost = gpu_hours_lost(t, gpus);
  r.attempt = facts.restart_count;
  progress_of(t, r);
  return r;
}

nlohmann::json outcome_to_json(const OutcomeRecord& r) {
  return with_nodes(r, r.nodes());
}

nlohmann::json outcome_to_compact_json(const OutcomeRecord& r) {
  return with_nodes(r, r.nodelist);
}

OutcomeRecord outcome_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::invalid_argument("not a JSON object");
  const auto v = j.find("v");
  if (v == j.end() || !v->is_number_integer())
    throw std::invalid_argument("no record version \"v\"");
  if (v->get<int64_t>() != kOutcomeRecordVersion) {
    throw std::invalid_argument("record version " + std::to_string(v->get<int64_t>()) +
                                " (this agent reads " + std::to_string(kOutcomeRecordVersion) +
                                ")");
  }
  OutcomeRecord r;
  r.job_id = required<uint64_t>(j, "job_id");
  if (r.job_id == 0) throw std::invalid_argument("\"job_id\" is 0");
  r.user = bounded(required<std::string>(j, "user"), kMaxShortField);
  r.end_time = required<int64_t>(j, "end_time");
  r.status = bounded(required<std::string>(j, "status"), kMaxShortField);
  r.cls = nullable_string(j, "class");
  r.blame = nullable_string(j, "blame");
  try {
    r.nodelist = nodelist_from(j.at("nodes"));
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("\"nodes\": ") + e.what());
  }
  const auto implicated = required<nlohmann::json>(j, "implicated");
  if (!implicated.is_array()) throw std::invalid_argument("\"implicated\" is not an array");
  for (const nlohmann::json& n : implicated) {
    if (!n.is_object()) throw std::invalid_argument("an \"implicated\" entry is not an object");
    implicate(r.implicated, required<std::string>(n, "node"), required<std::string>(n, "why"),
              required<bool>(n, "trusted"));
  }
  if (const auto g = j.find("gpu_hours_lost"); g != j.end() && !g->is_null()) {
    if (!g->is_number()) throw std::invalid_argument("\"gpu_hours_lost\" is not a number");
    r.gpu_hours_lost = g->get<double>();
  }
  if (const auto a = nullable_integer(j, "attempt")) {
    if (*a < 0 || *a > INT32_MAX) throw std::invalid_argument("\"attempt\" is out of range");
    r.attempt = static_cast<int>(*a);
  }
  // Both or neither: a record that says how far its attempt got says it whole.
  const bool step = j.contains("last_step");
  const bool checkpoint = j.contains("last_checkpoint");
  if (step != checkpoint) {
    throw std::invalid_argument(std::string("\"") + (step ? "last_checkpoint" : "last_step") +
                                "\" is missing beside \"" +
                                (step ? "last_step" : "last_checkpoint") + "\"");
  }
  r.progress_known = step;
  r.last_step = nullable_integer(j, "last_step");
  r.last_checkpoint = nullable_integer(j, "last_checkpoint");
  return r;
}

}  // namespace triage::agent
