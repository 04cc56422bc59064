#include "agent/slurm/accounting_comment.h"

#include <algorithm>
#include <cerrno>
#include <system_error>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "agent/slurm/job_comment.h"
#include "common/safe_io.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage::agent {

namespace {

constexpr const char* kStateFile = "accounting-comments.json";
constexpr size_t kMaxStateBytes = size_t{16} << 20;

}  // namespace

namespace {

// Failures that waiting does not mend: no sacct on this node, or a cluster without accounting.
bool permanent(const std::string& error) {
  return error.find("not found in PATH") != std::string::npos ||
         error.find("accounting storage is disabled") != std::string::npos;
}

}  // namespace

CommentWrite write_accounting_comment(const SlurmCommandRunner& run, CommentField field,
                                      const JobRef& job, const std::string& summary) {
  const SlurmCommandResult read = run(read_comment_argv(job, field));
  if (!read.ok) {
    return {permanent(read.error) ? CommentWriteState::kLeftAlone : CommentWriteState::kFailed,
            "sacct: " + read.error};
  }
  const std::optional<std::string> existing = parse_read_comment(read.out);
  if (!existing) {
    if (read.out.empty()) {
      return {CommentWriteState::kFailed, "sacct has no record of the job yet"};
    }
    return {CommentWriteState::kLeftAlone,
            "the field holds a newline of another tool's and cannot be read back whole"};
  }
  const CommentMerge m = merge_accounting_comment(*existing, summary);
  if (!m.write) {
    return {m.unchanged ? CommentWriteState::kUnchanged : CommentWriteState::kLeftAlone, m.reason};
  }
  const SlurmCommandResult w = run(write_comment_argv(job, field, m.value));
  if (!w.ok) return {CommentWriteState::kFailed, "sacctmgr: " + w.error};
  if (w.out.find("Nothing modified") != std::string::npos) {
    return {CommentWriteState::kFailed, "sacctmgr modified nothing"};
  }
  return {CommentWriteState::kWritten, m.reason};
}

AccountingComments::AccountingComments(Options options, EventLoop& loop, WorkerPool& workers,
                                       SlurmCommandRunner run)
    : options_(std::move(options)), loop_(loop), workers_(workers), run_(std::move(run)) {}

void AccountingComments::open() {
  if (!enabled()) return;
  nlohmann::json state;
  try {
    UniqueFd dir = open_dir(options_.state_dir);
    UniqueFd f = open_regular_file_at(dir.get(), kStateFile, true);
    state = nlohmann::json::parse(read_fd_limited(f.get(), kMaxStateBytes));
  } catch (const std::system_error& e) {
    if (e.code().value() != ENOENT) spdlog::warn("accounting comments: {}", e.what());
    return;
  } catch (const std::exception& e) {
    spdlog::warn(
        "accounting comments: {} in {}/{} is unusable ({}); its pending writes are dropped",
        kStateFile, options_.state_dir, kStateFile, e.what());
    return;
  }
  if (!state.is_array()) return;
  for (const nlohmann::json& p : state) {
    if (!p.is_object() || !p.value("job_id", nlohmann::json()).is_number_unsigned() ||
        !p.value("summary", nlohmann::json()).is_string()) {
      continue;
    }
    const uint64_t id = p["job_id"].get<uint64_t>();
    JobRef ref;
    try {
      // An entry without the names (an older agent's) cannot say which array task it meant.
      ref = job_ref_from_state(id, p.value("controller", ""), p.value("accounting", ""));
    } catch (const JobRefError& e) {
      spdlog::warn("accounting comments: a pending write dropped: {}", e.what());
      continue;
    }
    Pending& e = pending_[id];
    e.job = ref;
    e.summary = p["summary"].get<std::string>();
    e.first_usec = p.value("first_usec", now_usec());
    e.tries = p.value("tries", 0);
    e.generation = ++generation_;
  }
  stats_.pending = pending_.size();
  if (!pending_.empty()) spdlog::info("accounting comments: {} write(s) pending", pending_.size());
  for (const auto& [id, p] : pending_)
    retry_later(id);
}

uint64_t AccountingComments::begin(const JobRef& job, const std::string& summary) {
  Pending& p = pending_[job.job_id];
  p.job = job;
  p.summary = summary;
  p.first_usec = now_usec();
  p.tries = 0;
  p.generation = ++generation_;
  return p.generation;
}

void AccountingComments::submit(const JobFacts& job, const std::string& summary) {
  if (!enabled()) return;
  try {
    submit(job_ref(job), summary);
  } catch (const JobRefError& e) {
    ++stats_.left_alone;
    spdlog::warn("job {}: {} not written: {}", job.job_id, to_string(options_.field), e.what());
  }
}

void AccountingComments::submit(const JobRef& job, const std::string& summary) {
  if (!enabled()) return;
  begin(job, summary);
  save();
  attempt(job.job_id);
}

void AccountingComments::record_try(const JobRef& job, const std::string& summary,
                                    const CommentWrite& result) {
  if (!enabled()) return;
  finish(job.job_id, begin(job, summary), result);
}

void AccountingComments::attempt(uint64_t job_id) {
  const auto it = pending_.find(job_id);
  if (it == pending_.end()) return;
  const JobRef job = it->second.job;
  const std::string summary = it->second.summary;
  const uint64_t generation = it->second.generation;
  const CommentField field = options_.field;
  const bool submitted = workers_.submit([this, job_id, job, summary, generation, field] {
    const CommentWrite r = write_accounting_comment(run_, field, job, summary);
    loop_.post([this, job_id, generation, r] { finish(job_id, generation, r); });
  });
  if (!submitted) retry_later(job_id);
}

void AccountingComments::finish(uint64_t job_id, uint64_t generation, const CommentWrite& r) {
  const auto it = pending_.find(job_id);
  if (it == pending_.end() || it->second.generation != generation) return;  // superseded
  const std::string field(to_string(options_.field));
  switch (r.state) {
    case CommentWriteState::kWritten:
      ++stats_.written;
      spdlog::info("job {}: {} set to our summary ({})", job_id, field, log_text(r.detail));
      break;
    case CommentWriteState::kUnchanged:
      ++stats_.unchanged;
      break;
    case CommentWriteState::kLeftAlone:
      ++stats_.left_alone;
      spdlog::warn("job {}: {} not written: {}", job_id, field, log_text(r.detail));
      break;
    case CommentWriteState::kFailed: {
      ++stats_.failed_tries;
      ++it->second.tries;
      const int64_t age_sec = (now_usec() - it->second.first_usec) / 1000000;
      if (age_sec < options_.give_up_after_sec) {
        spdlog::warn("job {}: {} not written yet (try {}: {}); trying again later", job_id, field,
                     it->second.tries, log_text(r.detail));
        save();
        retry_later(job_id);
        return;
      }
      ++stats_.given_up;
      spdlog::error("job {}: {} not written after {} tries over {} s: {}; given up", job_id, field,
                    it->second.tries, age_sec, log_text(r.detail));
      break;
    }
  }
  pending_.erase(it);
  save();
}

// Doubling delays from first_retry_ms up to max_retry_ms: a slurmdbd that is down for an hour is
// asked a dozen times, not a thousand.
void AccountingComments::retry_later(uint64_t job_id) {
  const auto it = pending_.find(job_id);
  if (it == pending_.end()) return;
  int64_t delay = options_.first_retry_ms;
  for (int i = 1; i < it->second.tries && delay < options_.max_retry_ms; ++i)
    delay *= 2;
  delay = std::min(delay, options_.max_retry_ms);
  const uint64_t generation = it->second.generation;
  loop_.after(delay, [this, job_id, generation] {
    const auto p = pending_.find(job_id);
    if (p != pending_.end() && p->second.generation == generation) attempt(job_id);
  });
}

void AccountingComments::save() {
  while (pending_.size() > options_.max_pending) {
    spdlog::error("accounting comments: more than {} pending; job {}'s is dropped",
                  options_.max_pending, pending_.begin()->first);
    pending_.erase(pending_.begin());
  }
  stats_.pending = pending_.size();
  nlohmann::json state = nlohmann::json::array();
  for (const auto& [id, p] : pending_) {
    state.push_back({{"job_id", id},
                     {"controller", p.job.controller},
                     {"accounting", p.job.accounting},
                     {"summary", p.summary},
                     {"first_usec", p.first_usec},
                     {"tries", p.tries}});
  }
  try {
    UniqueFd dir = open_dir(options_.state_dir);
    atomic_write_at(dir.get(), kStateFile, state.dump() + "\n", 0600);
  } catch (const std::exception& e) {
    spdlog::error("accounting comments: pending writes not durable: {}", e.what());
  }
}

}  // namespace triage::agent
