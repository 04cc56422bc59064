#include "analyzer/live_progress.h"

#include <algorithm>

namespace triage {

namespace {

// A line's date: its own timestamp when it has one, capped at its arrival; else its arrival.
int64_t dated(int64_t own_usec, int64_t arrived_usec) {
  return own_usec > 0 ? std::min(own_usec, arrived_usec) : arrived_usec;
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

LiveProgress::LiveProgress(const SignatureCatalog& catalog)
    : catalog_(&catalog), warned_(catalog.classes().size(), false) {}

ScanOptions LiveProgress::next_scan_options() const {
  ScanOptions o;
  o.head_lines = 0;
  o.tail_lines = 0;
  o.first_line = lines_ + 1;
  if (has_steps()) o.continue_steps = steps_;
  return o;
}

void LiveProgress::absorb(const ScanResult& chunk, int64_t arrived_usec) {
  absorb_steps(chunk.facts, arrived_usec);
  absorb_pause(chunk.facts.checkpoint_save, arrived_usec, checkpoint_save_);
  absorb_pause(chunk.facts.evaluation, arrived_usec, evaluation_);
  absorb_warnings(chunk, arrived_usec);
  lines_ += chunk.lines;
}

void LiveProgress::absorb_steps(const LogFacts& facts, int64_t arrived_usec) {
  const StepSegment& seg = facts.steps;
  if (seg.first_step < 0 || (facts.restarts == 0 && seg.last_line == steps_.last_line)) return;
  if (facts.restarts > 0) {
    // The runs that ended in this chunk (the first of them is the one this chunk continued).
    const size_t ended = std::min<size_t>(facts.restarts, facts.earlier.size());
    for (size_t i = facts.earlier.size() - ended; i < facts.earlier.size(); ++i)
      earlier_steps_ += facts.earlier[i].distinct_steps;
    restarts_ += facts.restarts;
    longest_gap_usec_ = 0;  // a new run: its own pace, its own pauses
    first_step_usec_ = dated(seg.first_time_usec, arrived_usec);
    last_step_usec_ = 0;
  } else if (!has_steps()) {
    first_step_usec_ = dated(seg.first_time_usec, arrived_usec);
  } else {
    // The silence the job just broke with new steps: healthy, whatever caused it.
    longest_gap_usec_ = std::max(longest_gap_usec_, arrived_usec - last_step_usec_);
  }
  last_step_usec_ = std::max(last_step_usec_, dated(seg.last_time_usec, arrived_usec));
  steps_ = seg;
  // The post-mortem's step time, with lines that carry no timestamp dated by their arrival.
  StepSegment live_dated = steps_;
  live_dated.first_time_usec = first_step_usec_;
  live_dated.last_time_usec = last_step_usec_;
  step_time_ = step_time_of(live_dated);
}

void LiveProgress::absorb_pause(const PauseAnnouncement& seen, int64_t arrived_usec,
                                LiveLine& kept) const {
  if (seen.line <= 0) return;
  kept.line = seen.line;
  kept.usec = dated(seen.time_usec, arrived_usec);
  kept.text = seen.text;
}

void LiveProgress::absorb_warnings(const ScanResult& chunk, int64_t arrived_usec) {
  const auto& classes = catalog_->classes();
  const size_t before = warnings_.size();
  for (size_t c = 0; c < chunk.classes.size() && c < classes.size(); ++c) {
    if (warned_[c] || chunk.classes[c].count == 0) continue;
    const Finding* f = warning_finding(classes[c], chunk.classes[c]);
    if (f == nullptr) continue;
    warned_[c] = true;
    warnings_.push_back(EarlyWarning{f->cls, f->line, f->text, f->truncated, arrived_usec});
  }
  std::sort(warnings_.begin() + static_cast<std::ptrdiff_t>(before), warnings_.end(),
            [](const EarlyWarning& a, const EarlyWarning& b) { return a.line < b.line; });
}

}  // namespace triage
