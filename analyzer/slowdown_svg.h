// Full mode's two pictures of a job's pace, beside triage.md: the step time over the run with the
// slowdown marked (straggler_verdict.h), and each node's mean GPU core clock as a heat strip (one
// row per node, time left to right, lower clocks darker), so a throttling node stands out. Pure
// renderers: the caller writes the files.
#pragma once

#include <string>
#include <vector>

#include "analyzer/straggler_verdict.h"
#include "analyzer/tsdb/tsdb.h"

namespace triage {

// "" when the run has fewer than two timed steps.
std::string render_step_time_svg(const std::vector<StepPace>& steps, const Slowdown& slowdown);

// "" when no node has clock samples. `start`/`end` in seconds since the epoch.
std::string render_clock_strip_svg(const std::vector<tsdb::TimelineSeries>& clock, double start,
                                   double end, const Slowdown& slowdown);

// "<report stem>-step-time.svg" and "<report stem>-gpu-clocks.svg".
std::string step_time_svg_name(const std::string& report_md_name);
std::string clock_strip_svg_name(const std::string& report_md_name);

}  // namespace triage
