#include "analyzer/slowdown_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "analyzer/tsdb/svg_text.h"
#include "common/time_util.h"

namespace triage {
namespace {

constexpr int kWidth = 900;
constexpr int kLeft = 150;  // room for node names
constexpr int kRight = 20;
constexpr int kTop = 30;
constexpr size_t kMaxPoints = 1200;  // points drawn on the step-time line
constexpr int kStripColumns = 180;   // time bins of the heat strip
constexpr int kRowHeight = 16;
constexpr size_t kMaxRows = 256;  // nodes drawn (a huge job's strip stays a readable file)

std::string xml(const std::string& s) {
  return svg_text(s);
}

std::string num(double v) {
  return svg_number(v);
}

std::string stem_of(const std::string& report_md_name) {
  std::string stem = report_md_name;
  if (stem.size() > 3 && stem.compare(stem.size() - 3, 3, ".md") == 0) stem.resize(stem.size() - 3);
  return stem;
}

}  // namespace

std::string step_time_svg_name(const std::string& report_md_name) {
  return stem_of(report_md_name) + "-step-time.svg";
}

std::string clock_strip_svg_name(const std::string& report_md_name) {
  return stem_of(report_md_name) + "-gpu-clocks.svg";
}

std::string render_step_time_svg(const std::vector<StepPace>& steps, const Slowdown& slowdown) {
  std::vector<const StepPace*> timed;
  for (const StepPace& s : steps) {
    if (s.seconds > 0) timed.push_back(&s);
  }
  if (timed.size() < 2) return {};
  const size_t every = (timed.size() + kMaxPoints - 1) / kMaxPoints;
  const double x0 = static_cast<double>(timed.front()->step);
  const double x1 = std::max(x0 + 1, static_cast<double>(timed.back()->step));
  // The scale stops at 3x the median: a checkpoint step of minutes would flatten the rest.
  std::vector<double> secs;
  secs.reserve(timed.size());
  for (const StepPace* s : timed)
    secs.push_back(s->seconds);
  std::nth_element(secs.begin(), secs.begin() + static_cast<std::ptrdiff_t>(secs.size() / 2),
                   secs.end());
  const double top = std::max(secs[secs.size() / 2] * 3, slowdown.found ? slowdown.to_s * 1.5 : 0);
  const int h = 260;
  const int plot_h = h - kTop - 40;
  auto px = [&](double step) {
    return kLeft + (step - x0) / (x1 - x0) * (kWidth - kLeft - kRight);
  };
  auto py = [&](double sec) { return kTop + plot_h - std::min(sec, top) / top * plot_h; };
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(kWidth) +
                    "\" height=\"" + std::to_string(h) + "\" font-family=\"sans-serif\" " +
                    "font-size=\"11\">\n<title>Step time over the run</title>\n";
  svg += "<text x=\"10\" y=\"18\" font-size=\"13\">Step time (s) by step";
  if (slowdown.found) {
    svg += ": slowdown from " + num(slowdown.from_s) + " s to " + num(slowdown.to_s) +
           " s at step " + std::to_string(slowdown.since_step);
    if (!slowdown.node.empty()) svg += " (node " + xml(slowdown.node) + ")";
  }
  svg += "</text>\n";
  svg += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(kTop + plot_h) + "\" x2=\"" +
         num(kWidth - kRight) + "\" y2=\"" + num(kTop + plot_h) + "\" stroke=\"#888\"/>\n";
  for (const double v : {top / 3, top * 2 / 3, top}) {
    svg += "<text x=\"" + num(kLeft - 6) + "\" y=\"" + num(py(v) + 4) + "\" text-anchor=\"end\">" +
           num(v) + "</text>\n";
  }
  svg += "<text x=\"" + num(kLeft) + "\" y=\"" + num(h - 12) + "\">step " +
         std::to_string(timed.front()->step) + "</text>\n<text x=\"" + num(kWidth - kRight) +
         "\" y=\"" + num(h - 12) + "\" text-anchor=\"end\">step " +
         std::to_string(timed.back()->step) + "</text>\n";
  if (slowdown.found) {
    const double sx = px(static_cast<double>(slowdown.since_step));
    svg += "<rect x=\"" + num(sx) + "\" y=\"" + num(kTop) + "\" width=\"" +
           num(kWidth - kRight - sx) + "\" height=\"" + num(plot_h) +
           "\" fill=\"#d62728\" fill-opacity=\"0.08\"/>\n";
    svg += "<line x1=\"" + num(sx) + "\" y1=\"" + num(kTop) + "\" x2=\"" + num(sx) + "\" y2=\"" +
           num(kTop + plot_h) + "\" stroke=\"#d62728\" stroke-dasharray=\"4 3\"/>\n";
    for (const double v : {slowdown.from_s, slowdown.to_s}) {
      svg += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(py(v)) + "\" x2=\"" +
             num(kWidth - kRight) + "\" y2=\"" + num(py(v)) +
             "\" stroke=\"#999\" stroke-dasharray=\"2 3\"/>\n";
    }
  }
  svg += "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1\" points=\"";
  for (size_t i = 0; i < timed.size(); i += every)
    svg += num(px(static_cast<double>(timed[i]->step))) + "," + num(py(timed[i]->seconds)) + " ";
  svg += "\"/>\n</svg>\n";
  return svg;
}

std::string render_clock_strip_svg(const std::vector<tsdb::TimelineSeries>& clock, double start,
                                   double end, const Slowdown& slowdown) {
  double hi = 0;
  size_t rows = 0;
  for (const auto& s : clock) {
    for (const auto& p : s.points)
      hi = std::max(hi, p.v);
    if (!s.points.empty()) ++rows;
  }
  rows = std::min(rows, kMaxRows);
  if (rows == 0 || hi <= 0 || end <= start) return {};
  const int h = kTop + static_cast<int>(rows) * kRowHeight + 30;
  const double col_w = static_cast<double>(kWidth - kLeft - kRight) / kStripColumns;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(kWidth) +
                    "\" height=\"" + std::to_string(h) + "\" font-family=\"sans-serif\" " +
                    "font-size=\"11\">\n<title>GPU core clock per node</title>\n";
  svg += "<text x=\"10\" y=\"18\" font-size=\"13\">Mean GPU core clock per node, " +
         xml(format_utc(static_cast<int64_t>(start * 1e6))) + " to " +
         xml(format_utc(static_cast<int64_t>(end * 1e6))) + " (darker = lower, top " + num(hi) +
         " MHz)</text>\n";
  size_t row = 0;
  for (const auto& s : clock) {
    if (s.points.empty()) continue;
    if (row >= rows) break;
    const double y = kTop + static_cast<double>(row) * kRowHeight;
    const bool named = slowdown.found && s.name == slowdown.node;
    svg += "<text x=\"" + num(kLeft - 6) + "\" y=\"" + num(y + kRowHeight - 4) +
           "\" text-anchor=\"end\"" + (named ? " font-weight=\"bold\" fill=\"#d62728\"" : "") +
           ">" + xml(s.name) + "</text>\n";
    // Each column: the mean of the samples in its time bin; a bin without samples stays blank.
    std::vector<double> sum(kStripColumns, 0);
    std::vector<int> n(kStripColumns, 0);
    for (const auto& p : s.points) {
      const auto c = static_cast<long>((p.t - start) / (end - start) * kStripColumns);
      if (c < 0 || c >= kStripColumns) continue;
      sum[static_cast<size_t>(c)] += p.v;
      ++n[static_cast<size_t>(c)];
    }
    for (size_t c = 0; c < static_cast<size_t>(kStripColumns); ++c) {
      if (n[c] == 0) continue;
      const double f = std::clamp(sum[c] / n[c] / hi, 0.0, 1.0);
      // 100% of the top clock is pale, 50% or less is dark red.
      const double k = std::clamp((1 - f) * 2, 0.0, 1.0);
      const int r = static_cast<int>(std::lround(235 - 95 * k));
      const int g = static_cast<int>(std::lround(240 - 220 * k));
      const int b = static_cast<int>(std::lround(245 - 225 * k));
      char fill[16];
      (void)std::snprintf(fill, sizeof fill, "#%02x%02x%02x", r, g, b);
      svg += "<rect x=\"" + num(kLeft + static_cast<double>(c) * col_w) + "\" y=\"" + num(y) +
             "\" width=\"" + num(col_w + 0.5) + "\" height=\"" + std::to_string(kRowHeight - 2) +
             "\" fill=\"" + fill + "\"/>\n";
    }
    ++row;
  }
  if (slowdown.found && slowdown.since_usec > 0) {
    const double t = static_cast<double>(slowdown.since_usec) / 1e6;
    if (t >= start && t <= end) {
      const double x = kLeft + (t - start) / (end - start) * (kWidth - kLeft - kRight);
      svg += "<line x1=\"" + num(x) + "\" y1=\"" + num(kTop - 4) + "\" x2=\"" + num(x) +
             "\" y2=\"" + num(h - 26) + "\" stroke=\"#d62728\" stroke-dasharray=\"4 3\"/>\n";
      svg += "<text x=\"" + num(x) + "\" y=\"" + num(h - 12) +
             "\" text-anchor=\"middle\" fill=\"#d62728\">slowdown</text>\n";
    }
  }
  return svg + "</svg>\n";
}

}  // namespace triage
