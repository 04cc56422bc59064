// The `tsdb` object of triage.json (documented in docs/tsdb.md). NaN and infinities become null;
// each playbook's findings are rendered like the log's (analyzer/finding_render.h).
#include <cmath>

#include <nlohmann/json.hpp>

#include "analyzer/finding_render.h"
#include "analyzer/tsdb/playbook_context.h"
#include "analyzer/tsdb/tsdb.h"
#include "common/text.h"

namespace triage::tsdb {

namespace {

using json = nlohmann::json;

json num(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

template <typename T>
json opt(const std::optional<T>& v) {
  if (!v) return nullptr;
  if constexpr (std::is_floating_point_v<T>) return num(*v);
  return *v;
}

json time_json(std::optional<double> t) {
  if (!t || !std::isfinite(*t)) return nullptr;
  return json{{"epoch", *t}, {"utc", fmt_time(*t)}};
}

// Strings from a TSDB (label values) are the job's data: kept valid UTF-8 for the JSON writer.
std::string safe(const std::string& s) {
  return is_valid_utf8(s) ? s : printable(s);
}

// A finding names hosts and label values: the same repair before the shared renderer sees it.
Finding safe(Finding f) {
  f.text = safe(f.text);
  f.host = safe(f.host);
  for (auto& h : f.hosts)
    h = safe(h);
  return f;
}

json labels_json(const Labels& l) {
  json j = json::object();
  for (const auto& [k, v] : l)
    j[safe(k)] = safe(v);
  return j;
}

json query_json(const QueryRecord& q) {
  json j{{"query", safe(q.query)}, {"kind", q.kind}, {"time", num(q.time)}};
  if (q.kind == "range" || q.kind == "raw" || q.kind == "labels") j["start"] = num(q.start);
  if (q.kind == "range") j["step"] = num(q.step);
  json rows = json::array();
  for (const auto& r : q.rows) {
    json row{{"labels", labels_json(r.labels)}, {"value", num(r.value)}};
    if (r.min) row["min"] = num(*r.min);
    if (r.max) row["max"] = num(*r.max);
    if (r.avg) row["avg"] = num(*r.avg);
    if (q.kind != "instant") row["points"] = r.points;
    rows.push_back(std::move(row));
  }
  j["rows"] = std::move(rows);
  j["total_rows"] = q.total_rows;
  if (!q.error.empty()) j["error"] = safe(q.error);
  j["seconds"] = num(q.seconds);
  return j;
}

json anomaly_json(const Anomaly& a) {
  return json{{"time", time_json(a.time)}, {"host", safe(a.host)},
              {"gpu", safe(a.gpu)},        {"metric", a.metric},
              {"domain", a.domain},        {"kind", a.kind},
              {"text", safe(a.text)},      {"during_checkpoint", a.during_checkpoint}};
}

json strings(const std::vector<std::string>& v) {
  json a = json::array();
  for (const auto& s : v)
    a.push_back(safe(s));
  return a;
}

}  // namespace

json TsdbResult::to_json() const {
  json j;
  j["schema"] = 1;
  j["available"] = available;
  j["refused"] = refused;
  j["analysis_type"] = analysis_type;
  j["triage_class"] = triage_class;
  j["source"] = {{"kind", source.kind},
                 {"url", source.url},
                 {"path", safe(source.path)},
                 {"wal_included", source.wal_included},
                 {"trusted", source.trusted},
                 {"missing_from", time_json(source.missing_from)},
                 {"startup_seconds", num(source.startup_seconds)},
                 {"copied_bytes", source.copied_bytes},
                 {"host_label", source.host_label}};
  j["hosts"] = strings(hosts);
  j["hosts_missing"] = strings(hosts_missing);
  j["hosts_extra"] = strings(hosts_extra);
  j["time_range"] = {{"start", time_json(available ? std::optional<double>(start) : std::nullopt)},
                     {"end", time_json(available ? std::optional<double>(end) : std::nullopt)},
                     {"data_min", time_json(data_min)},
                     {"data_max", time_json(data_max)}};
  j["scrape_interval_s"] = num(scrape_interval_s);
  j["metrics"] = {{"count", metric_count}, {"families", families}};
  j["gpu_model"] = {{"name", gpu.model}, {"basis", gpu.basis}};
  j["guard"] = {{"status", guard.status},
                {"reason", safe(guard.reason)},
                {"log_step", opt(guard.log_step)},
                {"tsdb_step", opt(guard.tsdb_step)},
                {"log_loss", opt(guard.log_loss)},
                {"tsdb_loss", opt(guard.tsdb_loss)},
                {"tsdb_step_time", time_json(guard.tsdb_step_time)}};
  json books = json::array();
  for (const auto& p : playbooks) {
    json b{{"number", p.number},
           {"id", p.id},
           {"title", p.title},
           {"verdict", p.verdict},
           {"summary", safe(p.summary)},
           {"hosts", strings(p.hosts)},
           {"gpus", strings(p.gpus)},
           {"window", {{"start", time_json(p.window_start)}, {"end", time_json(p.window_end)}}}};
    json f = json::array();
    for (const auto& x : p.findings)
      f.push_back(json(finding_json(safe(x))));
    b["findings"] = std::move(f);
    json tables = json::array();
    for (const auto& t : p.tables) {
      json rows = json::array();
      for (const auto& r : t.rows)
        rows.push_back(strings(r));
      tables.push_back(
          {{"title", safe(t.title)}, {"columns", strings(t.columns)}, {"rows", std::move(rows)}});
    }
    b["tables"] = std::move(tables);
    json e = json::array();
    for (const auto& q : p.evidence)
      e.push_back(query_json(q));
    b["evidence"] = std::move(e);
    json a = json::array();
    for (const auto& x : p.anomalies)
      a.push_back(anomaly_json(x));
    b["anomalies"] = std::move(a);
    b["next_steps"] = strings(p.next_steps);
    b["notes"] = strings(p.notes);
    books.push_back(std::move(b));
  }
  j["playbooks"] = std::move(books);
  json ch{{"text", safe(chain.text)},
          {"root", chain.root ? anomaly_json(*chain.root) : json(nullptr)}};
  json effects = json::array(), symptoms = json::array();
  for (const auto& a : chain.effects)
    effects.push_back(anomaly_json(a));
  for (const auto& a : chain.symptoms)
    symptoms.push_back(anomaly_json(a));
  ch["effects"] = std::move(effects);
  ch["symptoms"] = std::move(symptoms);
  j["chain"] = std::move(ch);
  j["correlation"] = {{"triage_class", correlation.triage_class},
                      {"stance", correlation.stance},
                      {"text", safe(correlation.text)}};
  json hw = json::array();
  for (const auto& v : hardware) {
    hw.push_back({{"host", safe(v.host)},
                  {"component", safe(v.component)},
                  {"verdict", v.verdict},
                  {"action", v.action},
                  {"reason", safe(v.reason)},
                  {"metric", v.metric},
                  {"value", num(v.value)},
                  {"first_seen", time_json(v.first_seen)},
                  {"basis", v.basis},
                  {"source_trusted", v.source_trusted}});
  }
  j["hardware_verdicts"] = std::move(hw);
  j["recommendations"] = strings(recommendations);
  j["notes"] = strings(notes);
  j["stats"] = {{"queries", queries}, {"elapsed_s", num(elapsed_s)}};
  return j;
}

std::vector<NodeVerdict> TsdbResult::node_verdicts() const {
  std::vector<NodeVerdict> out;
  for (const auto& v : hardware) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const NodeVerdict& n) { return n.host == v.host; });
    if (it == out.end()) {
      out.push_back(NodeVerdict{v.host, "degraded", {}, 0});
      it = out.end() - 1;
    }
    if (v.action == "drain") it->verdict = "drain-recommended";
    VerdictReason r;
    r.reason = v.reason + " [" + v.metric +
               (v.source_trusted ? ", cluster Prometheus" : ", job TSDB: unverified") + "]";
    r.action = v.action;
    it->reasons.push_back(std::move(r));
    if (v.first_seen) {
      const auto usec = static_cast<int64_t>(*v.first_seen * 1e6);
      if (it->time_usec == 0 || usec < it->time_usec) it->time_usec = usec;
    }
  }
  return out;
}

}  // namespace triage::tsdb
