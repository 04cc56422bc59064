#include <algorithm>
#include <cmath>
#include <cstdio>

#include "analyzer/tsdb/playbook_context.h"
#include "common/time_util.h"

namespace triage::tsdb {

bool Discovery::in_checkpoint(double t) const {
  return std::any_of(checkpoints.begin(), checkpoints.end(),
                     [&](const auto& c) { return c.second.contains(t); });
}

bool Discovery::ghost_at(const std::string& host, double t) const {
  auto it = ghost.find(host);
  if (it == ghost.end()) return false;
  return std::any_of(it->second.begin(), it->second.end(),
                     [&](const Interval& i) { return i.contains(t); });
}

std::optional<double> Discovery::time_of_step(int64_t step) const {
  for (const auto& s : steps) {
    if (s.step >= step) return s.t;
  }
  return std::nullopt;
}

std::optional<int64_t> Discovery::step_at(double t) const {
  std::optional<int64_t> out;
  for (const auto& s : steps) {
    if (s.t > t) break;
    out = s.step;
  }
  return out;
}

const std::vector<Sample>& Context::nonzero_increase(const std::string& metric,
                                                     std::vector<QueryRecord>* sink) {
  auto it = counter_cache.find(metric);
  if (it != counter_cache.end()) return it->second;
  std::vector<Sample> rows;
  if (disc.has(metric)) {
    rows = q.instant("increase(" + scope.sel(metric) + "[" + dur(disc.end - disc.start) + "]) > 0",
                     disc.end, sink);
  }
  return counter_cache.emplace(metric, std::move(rows)).first->second;
}

double median(std::vector<double> v) {
  return quantile(std::move(v), 0.5);
}

double quantile(std::vector<double> v, double q) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }), v.end());
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const auto hi = static_cast<size_t>(std::ceil(pos));
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

double mad(const std::vector<double>& v) {
  const double m = median(v);
  std::vector<double> dev;
  dev.reserve(v.size());
  for (double x : v) {
    if (std::isfinite(x)) dev.push_back(std::abs(x - m));
  }
  return median(std::move(dev));
}

double mean(const std::vector<double>& v) {
  double s = 0;
  size_t n = 0;
  for (double x : v) {
    if (std::isfinite(x)) {
      s += x;
      ++n;
    }
  }
  return n == 0 ? std::nan("") : s / static_cast<double>(n);
}

std::string fmt(double v, int decimals) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  (void)std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string fmt_watts(double v) {
  return fmt(v, 0) + " W";
}
std::string fmt_pct(double v) {
  return fmt(v, v < 10 ? 1 : 0) + "%";
}

std::string fmt_bytes(double v) {
  if (!std::isfinite(v)) return fmt(v);
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::abs(v) >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return fmt(v, u == 0 ? 0 : 1) + " " + units[u];
}

std::string fmt_rate(double per_s) {
  if (std::isfinite(per_s) && per_s != 0 && std::abs(per_s) < 0.1)
    return fmt(per_s * 60, 1) + "/min";
  return fmt(per_s, per_s >= 100 ? 0 : 1) + "/s";
}

std::string fmt_time(double t) {
  if (!std::isfinite(t)) return "?";
  return format_utc(static_cast<int64_t>(std::llround(t * 1e6)));
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += sep;
    out += v[i];
  }
  return out;
}

std::string list_names(const std::vector<std::string>& names, size_t max) {
  if (names.size() <= max) return join(names);
  std::vector<std::string> head(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(max));
  return join(head) + " and " + std::to_string(names.size() - max) + " more";
}

void add_unique(std::vector<std::string>& v, const std::string& s) {
  if (!s.empty() && std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

}  // namespace triage::tsdb
