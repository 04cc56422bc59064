#include "analyzer/tsdb/query_scope.h"

#include <algorithm>
#include <cmath>

#include "common/time_util.h"

namespace triage::tsdb {

namespace {

void keep_row(QueryRecord& rec, QueryRecord::Row row) {
  ++rec.total_rows;
  if (rec.rows.size() < Querier::kMaxRowsKept) rec.rows.push_back(std::move(row));
}

QueryRecord::Row summarize(const Series& s) {
  QueryRecord::Row row;
  row.labels = s.labels;
  row.points = s.points.size();
  double sum = 0;
  size_t n = 0;
  for (const auto& p : s.points) {
    if (!std::isfinite(p.v)) continue;
    row.min = row.min ? std::min(*row.min, p.v) : p.v;
    row.max = row.max ? std::max(*row.max, p.v) : p.v;
    sum += p.v;
    ++n;
  }
  if (n > 0) row.avg = sum / static_cast<double>(n);
  if (!s.points.empty()) row.value = s.points.back().v;
  return row;
}

}  // namespace

Scope::Scope(std::string host_label, std::vector<std::string> hosts)
    : host_label_(std::move(host_label)), hosts_(std::move(hosts)) {}

std::string regex_alternatives(const std::vector<std::string>& values) {
  std::string out = "(";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += '|';
    for (char c : values[i]) {
      const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                         (c >= '0' && c <= '9') || c == '_' || c == '-';
      if (!plain) out += "\\\\";  // one backslash for the regex, escaped for the PromQL string
      if (c == '"') out += "\\";
      out += c;
    }
  }
  out += ')';
  return out;
}

std::string Scope::matcher(const std::vector<std::string>& only) const {
  if (only.empty()) return {};
  // A cluster Prometheus may label a node "node001:9100" or "node001.cluster": allow a suffix
  // after a separator, never a longer name ("node1" must not match "node10").
  return host_label_ + "=~\"" + regex_alternatives(only) + "([:.].*)?\"";
}

std::string Scope::sel_hosts(const std::string& metric, const std::vector<std::string>& only,
                             const std::string& extra) const {
  std::string m = matcher(only);
  if (!extra.empty()) m += (m.empty() ? "" : ",") + extra;
  return m.empty() ? metric : metric + "{" + m + "}";
}

std::string Scope::sel(const std::string& metric, const std::string& extra) const {
  return sel_hosts(metric, hosts_, extra);
}

std::string Scope::host_of(const Labels& labels) const {
  auto it = labels.find(host_label_);
  if (it == labels.end()) {
    it = labels.find("instance");
    if (it == labels.end()) return {};
  }
  const std::string& v = it->second;
  if (hosts_.empty() || std::find(hosts_.begin(), hosts_.end(), v) != hosts_.end()) return v;
  for (const auto& h : hosts_) {
    if (v.size() > h.size() && v.compare(0, h.size(), h) == 0 &&
        (v[h.size()] == ':' || v[h.size()] == '.')) {
      return h;
    }
  }
  return v;
}

std::string gpu_of(const Labels& labels) {
  for (const char* k : {"gpu", "GpuIndex", "gpu_index", "minor_number"}) {
    auto it = labels.find(k);
    if (it != labels.end()) return it->second;
  }
  return {};
}

std::string host_gpu(const Scope& scope, const Labels& labels) {
  const std::string g = gpu_of(labels);
  const std::string h = scope.host_of(labels);
  return g.empty() ? h : h + ":" + g;
}

std::string label_eq(const std::string& name, const std::string& value) {
  std::string out = name + "=\"";
  for (char c : value) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string device_matcher(const Labels& labels) {
  std::string out;
  for (const char* k : {"device", "port"}) {
    auto it = labels.find(k);
    if (it == labels.end()) continue;
    if (!out.empty()) out += ',';
    out += label_eq(k, it->second);
  }
  return out;
}

std::string device_of(const Labels& l) {
  auto d = l.find("device");
  if (d == l.end()) return {};
  auto p = l.find("port");
  return p == l.end() ? d->second : d->second + "/" + p->second;
}

std::string dur(double seconds) {
  const auto s = static_cast<long long>(std::ceil(std::max(1.0, seconds)));
  return std::to_string(s) + "s";
}

std::string range_window(double seconds) {
  return std::string("[").append(dur(seconds)).append("]");
}

std::string subquery_window(double range_s, double step_s) {
  return std::string("[").append(dur(range_s)).append(":").append(dur(step_s)).append("]");
}

void Querier::fail(QueryRecord& rec, const PromError& e) {
  ++failures_;
  rec.error = e.what();
  last_error_ = e.what();
  if (e.kind() == PromError::Kind::kConnect || e.kind() == PromError::Kind::kTimeout) {
    // Two in a row: the server is gone or wedged.
    if (++connection_failures_ >= 2) broken_ = true;
  } else {
    connection_failures_ = 0;
  }
}

void Querier::run(QueryRecord rec, std::vector<QueryRecord>* sink,
                  const std::function<void(QueryRecord&)>& body) {
  if (broken_) {
    rec.error = "skipped: the server stopped answering (" + last_error_ + ")";
  } else {
    const int64_t t0 = monotonic_usec();
    try {
      body(rec);
      connection_failures_ = 0;
    } catch (const PromError& e) {
      fail(rec, e);
    }
    rec.seconds = static_cast<double>(monotonic_usec() - t0) / 1e6;
  }
  if (sink != nullptr) sink->push_back(std::move(rec));
}

std::vector<Sample> Querier::instant(const std::string& q, double time,
                                     std::vector<QueryRecord>* sink) {
  QueryRecord rec;
  rec.query = q;
  rec.kind = "instant";
  rec.time = time;
  std::vector<Sample> out;
  run(std::move(rec), sink, [&](QueryRecord& r) {
    out = client_.query(q, time).samples;
    for (const auto& s : out) {
      QueryRecord::Row row;
      row.labels = s.labels;
      row.value = s.point.v;
      row.points = 1;
      keep_row(r, std::move(row));
    }
  });
  return out;
}

std::vector<Series> Querier::range(const std::string& q, double start, double end, double step,
                                   std::vector<QueryRecord>* sink) {
  QueryRecord rec;
  rec.query = q;
  rec.kind = "range";
  rec.start = start;
  rec.time = end;
  rec.step = step;
  std::vector<Series> out;
  if (!(end > start)) return out;
  run(std::move(rec), sink, [&](QueryRecord& r) {
    out = client_.query_range(q, start, end, step).series;
    for (const auto& s : out)
      keep_row(r, summarize(s));
  });
  return out;
}

std::vector<Series> Querier::raw(const std::string& selector, double time, double window_s,
                                 std::vector<QueryRecord>* sink) {
  QueryRecord rec;
  rec.query = selector + "[" + dur(window_s) + "]";
  rec.kind = "raw";
  rec.time = time;
  rec.start = time - window_s;
  std::vector<Series> out;
  const std::string q = rec.query;
  run(std::move(rec), sink, [&](QueryRecord& r) {
    out = client_.query(q, time).series;
    for (const auto& s : out)
      keep_row(r, summarize(s));
  });
  return out;
}

std::vector<std::string> Querier::labels(const std::string& label,
                                         const std::vector<std::string>& match, double start,
                                         double end, std::vector<QueryRecord>* sink) {
  QueryRecord rec;
  rec.query =
      "label_values(" + label + (match.empty() ? std::string() : ", " + match.front()) + ")";
  rec.kind = "labels";
  rec.start = start;
  rec.time = end;
  std::vector<std::string> out;
  run(std::move(rec), sink, [&](QueryRecord& r) {
    out = client_.label_values(label, match, start, end);
    r.total_rows = out.size();
  });
  return out;
}

}  // namespace triage::tsdb
