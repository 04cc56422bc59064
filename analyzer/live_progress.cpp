#include "analyzer/live_progress.h"

#include <algorithm>
#include <climits>

#include "analyzer/line_text.h"
#include "common/time_util.h"

namespace triage {

namespace {

// step_time_of reads a run's span from its first and last step's times: any origin will do.
constexpr int64_t kSpanOrigin = 1;

// The time between two step lines by their own timestamps, when both have one of the same kind
// and the difference is one the reads allow: not negative (a fall-back night repeats an hour) and
// not longer than `at_most` (a clock stepped forward). nullopt: not usable.
std::optional<int64_t> stamped_difference(const std::optional<LineTimestamp>& from,
                                          const std::optional<LineTimestamp>& to, int64_t at_most) {
  if (!from || !to || from->zoned != to->zoned) return std::nullopt;
  const int64_t d = to->usec - from->usec;
  if (d < 0 || d > at_most) return std::nullopt;
  return d;
}

// The finding that makes a class an early warning: its first line when the class is a cause, else
// its first `cause-pattern` line (a consequence class can name a cause in some shapes).
const Finding* warning_finding(const SignatureClass& c, const ClassMatches& m) {
  if (c.role == ClassRole::kCause) return m.earliest();
  for (const Finding& f : m.first) {
    if (f.cause) return &f;
  }
  return nullptr;
}

}  // namespace

LiveInstant live_now() {
  return LiveInstant{now_usec(), monotonic_usec()};
}

LiveProgress::LiveProgress(const SignatureCatalog& catalog, LineDating dating)
    : catalog_(&catalog), dating_(dating), warned_(catalog.classes().size(), false) {}

ScanOptions LiveProgress::next_scan_options() const {
  ScanOptions o;
  o.head_lines = 0;
  o.tail_lines = 0;
  o.first_line = lines_ + 1;
  if (has_steps()) o.continue_steps = steps_;
  return o;
}

void LiveProgress::absorb(const ScanResult& chunk, const LiveInstant& arrived,
                          int64_t previous_read_mono) {
  absorb_steps(chunk.facts, arrived, previous_read_mono);
  absorb_pause(chunk.facts.checkpoint_save, arrived.wall_usec, checkpoint_save_);
  absorb_pause(chunk.facts.evaluation, arrived.wall_usec, evaluation_);
  absorb_warnings(chunk, arrived.wall_usec);
  pace_.absorb(chunk.facts);
  lines_ += chunk.lines;
}

int64_t LiveProgress::printed_before_arrival(const std::optional<LineTimestamp>& stamp,
                                             const LiveInstant& arrived,
                                             int64_t previous_read_mono) const {
  if (!stamp) return 0;
  if (dating_ == LineDating::kByOwnStamps)
    return std::max<int64_t>(0, arrived.wall_usec - stamp->usec);
  // A naive time is in the job's zone, which may not be the agent's; a zoned one is an instant,
  // but the line was not in the file at the previous read, whatever its writer's clock says.
  if (!stamp->zoned || previous_read_mono <= 0) return 0;
  return std::clamp<int64_t>(arrived.wall_usec - stamp->usec, 0,
                             std::max<int64_t>(0, arrived.mono_usec - previous_read_mono));
}

void LiveProgress::absorb_steps(const LogFacts& facts, const LiveInstant& arrived,
                                int64_t previous_read_mono) {
  const StepSegment& seg = facts.steps;
  if (seg.first_step < 0 || (facts.restarts == 0 && seg.last_line == steps_.last_line)) return;
  const std::optional<LineTimestamp> stamp =
      step_line_timestamp(split_line(seg.last_text).text, utc_year(arrived.wall_usec));
  const int64_t printed =
      arrived.mono_usec - printed_before_arrival(stamp, arrived, previous_read_mono);
  const bool new_run = facts.restarts > 0 || !has_steps();
  if (facts.restarts > 0) {
    // The runs that ended in this chunk (the first of them is the one this chunk continued).
    const size_t ended = std::min<size_t>(facts.restarts, facts.earlier.size());
    for (size_t i = facts.earlier.size() - ended; i < facts.earlier.size(); ++i)
      earlier_steps_ += facts.earlier[i].distinct_steps;
    restarts_ += facts.restarts;
    longest_gap_usec_ = 0;  // a new run: its own pace, its own pauses
  }
  const bool any_age = dating_ == LineDating::kByOwnStamps || previous_read_mono <= 0;
  if (new_run) {
    // The run's span within this chunk, from its first step line to its last. Lines read before
    // any earlier read may be of any age.
    std::optional<LineTimestamp> first;
    if (seg.first_time_usec > 0 && stamp) first = LineTimestamp{seg.first_time_usec, stamp->zoned};
    const int64_t at_most =
        any_age ? INT64_MAX : std::max<int64_t>(0, arrived.mono_usec - previous_read_mono);
    span_usec_ = stamped_difference(first, stamp, at_most).value_or(0);
    last_step_mono_ = printed;
  } else {
    // The silence the job just broke with new steps: healthy, whatever caused it.
    longest_gap_usec_ = std::max(longest_gap_usec_, arrived.mono_usec - last_step_mono_);
    // The previous last step was printed after the read before the one that brought it (when
    // there was one), so the two steps are at most that far apart.
    const int64_t since =
        last_step_not_before_mono_ > 0 ? last_step_not_before_mono_ : last_step_mono_;
    const int64_t at_most = dating_ == LineDating::kByOwnStamps
                                ? INT64_MAX
                                : std::max<int64_t>(0, arrived.mono_usec - since);
    span_usec_ += stamped_difference(last_step_stamp_, stamp, at_most)
                      .value_or(std::max<int64_t>(0, printed - last_step_mono_));
    last_step_mono_ = std::max(last_step_mono_, printed);
  }
  last_step_stamp_ = stamp;
  last_step_not_before_mono_ = previous_read_mono;
  steps_ = seg;
  // The post-mortem's step time, with the run's span as measured above.
  StepSegment live_dated = steps_;
  live_dated.first_time_usec = kSpanOrigin;
  live_dated.last_time_usec = kSpanOrigin + span_usec_;
  step_time_ = step_time_of(live_dated);
}

void LiveProgress::absorb_pause(const PauseAnnouncement& seen, int64_t arrived_wall,
                                LiveLine& kept) const {
  if (seen.line <= 0) return;
  kept.line = seen.line;
  kept.usec = arrived_wall;
  kept.text = seen.text;
}

void LiveProgress::absorb_warnings(const ScanResult& chunk, int64_t arrived_wall) {
  const auto& classes = catalog_->classes();
  const size_t before = warnings_.size();
  for (size_t c = 0; c < chunk.classes.size() && c < classes.size(); ++c) {
    if (warned_[c] || chunk.classes[c].count == 0) continue;
    const Finding* f = warning_finding(classes[c], chunk.classes[c]);
    if (f == nullptr) continue;
    warned_[c] = true;
    warnings_.push_back(EarlyWarning{f->cls, f->line, f->text, f->truncated, arrived_wall});
  }
  std::sort(warnings_.begin() + static_cast<std::ptrdiff_t>(before), warnings_.end(),
            [](const EarlyWarning& a, const EarlyWarning& b) { return a.line < b.line; });
}

}  // namespace triage
