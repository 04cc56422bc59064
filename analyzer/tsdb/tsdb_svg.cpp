// An SVG timeline beside triage.md: training step, mean GPU power and utilisation per host (hosts
// a verdict names drawn on top, in colour), checkpoint saves, the hang window and the failure.
// Plain SVG 1.1 without scripts or external references, so it renders anywhere it is linked.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "analyzer/tsdb/playbook_context.h"
#include "analyzer/tsdb/svg_text.h"
#include "analyzer/tsdb/tsdb.h"
#include "common/safe_io.h"
#include "common/text.h"

namespace triage::tsdb {

namespace {

constexpr double kWidth = 1100;
constexpr double kLeft = 70, kRight = 150;
constexpr double kPanel = 150, kGap = 40, kTop = 40;
const char* const kPalette[] = {"#d62728", "#1f77b4", "#ff7f0e", "#2ca02c",
                                "#9467bd", "#8c564b", "#e377c2", "#17becf"};

std::string xml(const std::string& raw) {
  return svg_text(raw);
}

std::string n(double v) {
  return svg_number(v);
}

struct Panel {
  double top = 0;
  double lo = 0, hi = 1;
  double t0 = 0, t1 = 1;
  double x(double t) const { return kLeft + (t - t0) / (t1 - t0) * (kWidth - kLeft - kRight); }
  double y(double v) const {
    return top + kPanel - (std::clamp(v, lo, hi) - lo) / (hi - lo) * kPanel;
  }
};

std::string polyline(const Panel& p, const std::vector<Point>& pts, const std::string& color,
                     double width, double opacity) {
  std::string out;
  std::string d;
  auto flush = [&]() {
    if (!d.empty()) {
      out += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"" + n(width) +
             "\" stroke-opacity=\"" + n(opacity) + "\" points=\"" + d + "\"/>\n";
    }
    d.clear();
  };
  double last_t = -1e300;
  const double gap =
      (p.t1 - p.t0) / 100;  // a missing stretch breaks the line instead of bridging it
  for (const auto& pt : pts) {
    if (!std::isfinite(pt.v)) continue;
    if (pt.t - last_t > gap) flush();
    d += n(p.x(pt.t)) + "," + n(p.y(pt.v)) + " ";
    last_t = pt.t;
  }
  flush();
  return out;
}

std::string frame(const Panel& p, const std::string& title, const std::string& lo_label,
                  const std::string& hi_label) {
  std::string s;
  s += "<rect x=\"" + n(kLeft) + "\" y=\"" + n(p.top) + "\" width=\"" + n(kWidth - kLeft - kRight) +
       "\" height=\"" + n(kPanel) + "\" fill=\"#fafafa\" stroke=\"#999\"/>\n";
  s += "<text x=\"" + n(kLeft) + "\" y=\"" + n(p.top - 6) +
       "\" font-size=\"13\" font-weight=\"bold\">" + xml(title) + "</text>\n";
  s += "<text x=\"" + n(kLeft - 6) + "\" y=\"" + n(p.top + 10) +
       "\" font-size=\"11\" text-anchor=\"end\">" + xml(hi_label) + "</text>\n";
  s += "<text x=\"" + n(kLeft - 6) + "\" y=\"" + n(p.top + kPanel) +
       "\" font-size=\"11\" text-anchor=\"end\">" + xml(lo_label) + "</text>\n";
  return s;
}

std::string hline(const Panel& p, double v, const std::string& color, const std::string& label) {
  return "<line x1=\"" + n(kLeft) + "\" x2=\"" + n(kWidth - kRight) + "\" y1=\"" + n(p.y(v)) +
         "\" y2=\"" + n(p.y(v)) + "\" stroke=\"" + color +
         "\" stroke-dasharray=\"6,4\"/>\n<text x=\"" + n(kWidth - kRight + 4) + "\" y=\"" +
         n(p.y(v) + 4) + "\" font-size=\"10\" fill=\"" + color + "\">" + xml(label) + "</text>\n";
}

}  // namespace

std::string render_svg_timeline(const TsdbResult& res) {
  const auto& tl = res.timeline;
  if (tl.end <= tl.start || (tl.steps.empty() && tl.power.empty() && tl.util.empty())) return {};
  std::vector<std::pair<std::string, int>> panels;  // which panels, in order
  if (!tl.steps.empty()) panels.emplace_back("step", 0);
  if (!tl.power.empty()) panels.emplace_back("power", 0);
  if (!tl.util.empty()) panels.emplace_back("util", 0);
  const double height = kTop + static_cast<double>(panels.size()) * (kPanel + kGap) + 30;
  std::string s =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
      "width=\"" +
      n(kWidth) + "\" height=\"" + n(height) + "\" font-family=\"sans-serif\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"" + n(kLeft) + "\" y=\"20\" font-size=\"15\" font-weight=\"bold\">" +
       xml("TSDB timeline " + fmt_time(tl.start) + " to " + fmt_time(tl.end) +
           (res.triage_class.empty() ? "" : " (" + res.triage_class + ")")) +
       "</text>\n";

  // Colours: named hosts get the palette, the others are drawn grey underneath.
  std::map<std::string, std::string> colour;
  size_t next = 0;
  for (const auto* list : {&tl.power, &tl.util}) {
    for (const auto& ser : *list) {
      if (ser.highlight && colour.count(ser.name) == 0) colour[ser.name] = kPalette[next++ % 8];
    }
  }

  double top = kTop;
  std::vector<Panel> drawn;
  for (const auto& [kind, unused] : panels) {
    Panel p;
    p.top = top + 14;
    p.t0 = tl.start;
    p.t1 = tl.end;
    if (kind == "step") {
      double mx = 1;
      for (const auto& pt : tl.steps)
        mx = std::max(mx, pt.v);
      p.lo = tl.steps.front().v;
      p.hi = std::max(mx, p.lo + 1);
      s += frame(p, "Training step (tb_step)", fmt(p.lo, 0), fmt(p.hi, 0));
      // Steps as a staircase.
      std::vector<Point> stairs;
      for (size_t i = 0; i < tl.steps.size(); ++i) {
        if (i > 0) stairs.push_back({tl.steps[i].t, tl.steps[i - 1].v});
        stairs.push_back(tl.steps[i]);
      }
      if (!stairs.empty()) stairs.push_back({tl.end, stairs.back().v});
      std::string d;
      for (const auto& pt : stairs)
        d += n(p.x(pt.t)) + "," + n(p.y(pt.v)) + " ";
      s += "<polyline fill=\"none\" stroke=\"#333\" stroke-width=\"1.5\" points=\"" + d + "\"/>\n";
    } else {
      const auto& list = kind == "power" ? tl.power : tl.util;
      double mx = kind == "util" ? 100 : 1;
      for (const auto& ser : list) {
        for (const auto& pt : ser.points) {
          if (std::isfinite(pt.v)) mx = std::max(mx, pt.v);
        }
      }
      if (kind == "power" && tl.power_active_w) mx = std::max(mx, *tl.power_active_w);
      p.lo = 0;
      p.hi = kind == "util" ? 100 : mx * 1.05;
      s += frame(
          p,
          kind == "power" ? "GPU power per host (mean over its GPUs)" : "GPU utilisation per host",
          "0", kind == "power" ? fmt_watts(p.hi) : "100%");
      for (const auto& ser : list) {
        if (!ser.highlight) s += polyline(p, ser.points, "#9a9a9a", 1, 0.6);
      }
      for (const auto& ser : list) {
        if (ser.highlight) s += polyline(p, ser.points, colour[ser.name], 2, 1);
      }
      if (kind == "power") {
        if (tl.power_active_w)
          s += hline(p, *tl.power_active_w, "#2ca02c", "active ~" + fmt_watts(*tl.power_active_w));
        if (tl.power_idle_level_w)
          s += hline(p, *tl.power_idle_level_w, "#d62728",
                     "idle-level ≤" + fmt_watts(*tl.power_idle_level_w));
      }
    }
    drawn.push_back(p);
    top += kPanel + kGap;
  }

  // Marks across every panel: checkpoints, the hang window, the failure.
  const double y0 = kTop + 14, y1 = top - kGap + 14;
  const Panel& ref = drawn.front();
  if (tl.hang_start && *tl.hang_start < tl.end) {
    const double x0 = ref.x(std::max(*tl.hang_start, tl.start));
    s += "<rect x=\"" + n(x0) + "\" y=\"" + n(y0) + "\" width=\"" + n(ref.x(tl.end) - x0) +
         "\" height=\"" + n(y1 - y0) + "\" fill=\"#ff7f0e\" fill-opacity=\"0.12\"/>\n<text x=\"" +
         n(x0 + 4) + "\" y=\"" + n(y1 + 14) + "\" font-size=\"11\" fill=\"#ff7f0e\">hang</text>\n";
  }
  for (const auto& [step, t] : tl.checkpoints) {
    if (t < tl.start || t > tl.end) continue;
    s += "<line x1=\"" + n(ref.x(t)) + "\" x2=\"" + n(ref.x(t)) + "\" y1=\"" + n(y0) + "\" y2=\"" +
         n(y1) + "\" stroke=\"#1f77b4\" stroke-dasharray=\"2,3\"><title>checkpoint step " +
         std::to_string(step) + "</title></line>\n";
  }
  if (!tl.checkpoints.empty()) {
    s += "<text x=\"" + n(kWidth - kRight + 4) + "\" y=\"" + n(y1 + 14) +
         "\" font-size=\"10\" fill=\"#1f77b4\">┆ checkpoint</text>\n";
  }
  if (tl.failure_time && *tl.failure_time >= tl.start && *tl.failure_time <= tl.end) {
    const double x = ref.x(*tl.failure_time);
    s += "<line x1=\"" + n(x) + "\" x2=\"" + n(x) + "\" y1=\"" + n(y0) + "\" y2=\"" + n(y1) +
         "\" stroke=\"#d62728\" stroke-width=\"2\"/>\n<text x=\"" + n(x + 4) + "\" y=\"" +
         n(y0 + 10) + "\" font-size=\"11\" fill=\"#d62728\">failure " +
         xml(fmt_time(*tl.failure_time)) + "</text>\n";
  }
  // Legend: the named hosts.
  double ly = kTop + 30;
  for (const auto& [host, c] : colour) {
    s += "<rect x=\"" + n(kWidth - kRight + 8) + "\" y=\"" + n(ly - 8) +
         "\" width=\"10\" height=\"10\" fill=\"" + c + "\"/><text x=\"" + n(kWidth - kRight + 22) +
         "\" y=\"" + n(ly + 1) + "\" font-size=\"11\">" + xml(host) + "</text>\n";
    ly += 16;
    if (ly > kTop + 30 + 16 * 10) break;
  }
  s += "<text x=\"" + n(kLeft) + "\" y=\"" + n(height - 8) + "\" font-size=\"10\" fill=\"#666\">" +
       xml(fmt_time(tl.start)) + "</text>\n<text x=\"" + n(kWidth - kRight) + "\" y=\"" +
       n(height - 8) + "\" font-size=\"10\" fill=\"#666\" text-anchor=\"end\">" +
       xml(fmt_time(tl.end)) + "</text>\n";
  s += "</svg>\n";
  return s;
}

bool write_svg_timeline(const TsdbResult& result, int dirfd, const std::string& name) {
  const std::string svg = render_svg_timeline(result);
  if (svg.empty()) return false;
  atomic_write_at(dirfd, name, svg, 0644);
  return true;
}

}  // namespace triage::tsdb
