#include "agent/live/live_job.h"

#include <algorithm>
#include <cstdint>

namespace triage::agent {

namespace {

constexpr size_t kMinBlock = size_t{16} << 10;
constexpr size_t kMaxBlock = size_t{1} << 20;

}  // namespace

ScanOptions chunk_scan_options(const LiveProgress& progress, uint64_t length) {
  ScanOptions o = progress.next_scan_options();
  o.max_bytes = length;
  o.calibrate = false;
  o.block_bytes = static_cast<size_t>(std::clamp<uint64_t>(length + 1, kMinBlock, kMaxBlock));
  return o;
}

LiveJob::LiveJob(uint64_t job_id, FollowState state, Identity owner, const ScanPlan& plan,
                 int64_t lines_before, const FollowLimits& limits)
    : job_id_(job_id),
      follower_(std::move(state), std::move(owner), limits),
      plan_(plan),
      progress_(plan.catalog()) {
  progress_.resume_after(lines_before);
}

LiveObservation LiveJob::poll(const LiveInstant& now, const LiveStallPolicy& policy) {
  LiveObservation obs;
  obs.job_id = job_id_;
  obs.at = now;
  const PollResult r = follower_.poll();
  obs.status = r.status;
  obs.error = r.error;
  if (r.truncated) {
    // The log starts over (a job that reopened it with O_TRUNC): so does its progress.
    progress_ = LiveProgress(plan_.catalog());
    warnings_reported_ = 0;
    pace_generation_ = UINT64_MAX;  // judged afresh: a warning about the old log clears
  }
  const int64_t steps_before = progress_.last_step_line();
  for (const LogChunk& c : r.chunks)
    scan(c, now, obs);
  last_read_mono_ = now.mono_usec;
  obs.new_steps = progress_.last_step_line() != steps_before && progress_.has_steps();
  for (; warnings_reported_ < progress_.warnings().size(); ++warnings_reported_)
    obs.new_warnings.push_back(progress_.warnings()[warnings_reported_]);
  obs.verdict = judge_stall(progress_, now, policy);
  // The pace is judged apart from the stall, and only when it moved (find_slowdown sorts the run's
  // windows: not worth doing for a poll that read no step).
  if (progress_.pace().generation() != pace_generation_) {
    pace_generation_ = progress_.pace().generation();
    obs.pace = judge_pace(progress_.pace().steps(), progress_.pace().rhythm());
  }
  obs.follow = follower_.state();
  obs.lines = progress_.lines();
  return obs;
}

void LiveJob::scan(const LogChunk& chunk, const LiveInstant& now, LiveObservation& obs) {
  if (last_fd_ >= 0 && chunk.fd != last_fd_) {
    // The path names a new file (rotation, replacement): its lines are a new log.
    progress_ = LiveProgress(plan_.catalog());
    warnings_reported_ = 0;
    pace_generation_ = UINT64_MAX;
  }
  last_fd_ = chunk.fd;
  const ScanResult scanned = scan_log(chunk.fd, plan_, chunk_scan_options(progress_, chunk.length));
  progress_.absorb(scanned, now, last_read_mono_);
  obs.bytes += scanned.bytes_scanned;
  if (!scanned.facts.collectives.empty()) obs.new_watchdog_lines = true;
}

}  // namespace triage::agent
