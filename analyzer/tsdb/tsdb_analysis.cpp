// The diagnosis from start to end: pick the source (cluster Prometheus, the live job's own, or a
// private copy of the job's TSDB), discover, guard, run the playbooks the triage class hands off
// to, and tie the results together. Missing pieces become notes, never failures.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "analyzer/tsdb/chain.h"
#include "analyzer/tsdb/discovery.h"
#include "analyzer/tsdb/local_prometheus.h"
#include "analyzer/tsdb/playbook_context.h"
#include "analyzer/tsdb/playbook_table.h"
#include "analyzer/tsdb/tsdb.h"
#include "analyzer/tsdb/tsdb_dir.h"
#include "common/rules_file.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage::tsdb {

namespace {

PromClientOptions client_options(const TsdbRequest& req) {
  PromClientOptions o;
  o.connect_timeout = std::chrono::milliseconds(3000);
  o.request_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(std::max(1.0, req.query_timeout_s) * 1000));
  return o;
}

// The playbook numbers to run: the explicit ones, else the class's plus the full-mode ones. Class
// playbook ids the table does not know become notes.
std::vector<int> chosen_playbooks(const TsdbRequest& req, TsdbResult& res) {
  std::vector<std::string> unknown;
  std::vector<int> books = req.playbooks.empty()
                               ? playbooks_for(req.class_playbooks, req.full, &unknown)
                               : req.playbooks;
  for (const auto& id : unknown)
    res.notes.push_back("the rules catalog names an unknown playbook '" + printable(id) + "' for " +
                        printable(req.triage_class));
  std::sort(books.begin(), books.end());
  books.erase(std::unique(books.begin(), books.end()), books.end());
  return books;
}

void choose_gpu_model(Querier& q, const Scope& scope, const Discovery& d, const TsdbRequest& req,
                      const Thresholds& th, TsdbResult& res, const GpuThresholds*& chosen) {
  chosen = th.by_hint(req.gpu_model);
  if (chosen != nullptr) {
    res.gpu = {chosen->model, "hint"};
    return;
  }
  if (d.has("ray_node_gpus_utilization")) {
    for (const auto& name : q.labels("GpuDeviceName", {scope.sel("ray_node_gpus_utilization")},
                                     d.start, d.end, nullptr)) {
      if ((chosen = th.by_hint(name)) != nullptr) {
        res.gpu = {chosen->model, "ray-device-name"};
        return;
      }
    }
  }
  if (d.has("hw_gpu_vram_total_bytes")) {
    for (const auto& s : q.instant("max(max_over_time(" + scope.sel("hw_gpu_vram_total_bytes") +
                                       "[" + dur(d.end - d.start) + "]))",
                                   d.end, nullptr)) {
      if ((chosen = th.by_vram(s.point.v / static_cast<double>(1ull << 30))) != nullptr) {
        res.gpu = {chosen->model, "vram"};
        return;
      }
    }
  }
  res.gpu = {"", "none"};
}

std::vector<Point> downsample(const std::vector<Point>& in, size_t max_points) {
  if (in.size() <= max_points) return in;
  std::vector<Point> out;
  const double stride = static_cast<double>(in.size()) / static_cast<double>(max_points);
  for (size_t i = 0; i < max_points; ++i)
    out.push_back(in[static_cast<size_t>(static_cast<double>(i) * stride)]);
  out.push_back(in.back());
  return out;
}

void build_timeline(Querier& q, const Scope& scope, const Discovery& d, const TsdbRequest& req,
                    const GpuThresholds& g, TsdbResult& res) {
  auto& tl = res.timeline;
  tl.start = d.start;
  tl.end = d.end;
  std::vector<Point> steps;
  for (const auto& s : d.steps)
    steps.push_back({s.t, static_cast<double>(s.step)});
  tl.steps = downsample(steps, 600);
  std::set<std::string> named;
  for (const auto& p : res.playbooks) {
    if (p.id == "gpu-health" || p.id == "network-health" || p.id == "training-stability") continue;
    named.insert(p.hosts.begin(), p.hosts.end());
  }
  const double step = std::max(d.scrape_s, std::ceil((d.end - d.start) / 600));
  auto per_host = [&](const std::string& metric, std::vector<TimelineSeries>& out,
                      const std::string& extra = "") {
    if (!d.has(metric)) return;
    for (const auto& s : q.range(by_host_agg(scope, "avg", scope.sel(metric, extra)), d.start,
                                 d.end, step, nullptr)) {
      TimelineSeries ts;
      ts.name = scope.host_of(s.labels);
      ts.highlight = named.count(ts.name) != 0;
      ts.points = s.points;
      out.push_back(std::move(ts));
    }
  };
  per_host("hw_gpu_power_watts", tl.power);
  per_host("ray_node_gpus_utilization", tl.util);
  // The core clock (seed 001: hw_gpu_clock_mhz{type="sclk"}) and temperature: a throttling node's
  // GPUs run at lower clocks or hotter while the others wait for it (straggler_verdict.h).
  per_host("hw_gpu_clock_mhz", tl.clock, "type=\"sclk\"");
  per_host("hw_gpu_temperature_celsius", tl.temperature);
  for (const auto& [ck, iv] : d.checkpoints)
    tl.checkpoints.emplace_back(ck, iv.start + d.scrape_s);
  tl.failure_time = req.failure_time;
  if (hands_off_to(req, "hang"))
    tl.hang_start = req.last_step_time ? req.last_step_time : d.last_step_change;
  if (g.has_power_levels()) {
    if (std::isfinite(g.power_active_w)) tl.power_active_w = g.power_active_w;
    tl.power_idle_level_w = g.idle_level_max_w;
    tl.power_unit_note = g.model;
  }
}

// Runs everything against one answering Prometheus. Returns false when the source turned out to
// hold nothing usable (the caller may then try the next source).
bool analyse_source(PromClient& client, const std::string& host_label, const TsdbRequest& req,
                    const Thresholds& th, std::optional<double> data_min,
                    std::optional<double> data_max, bool trusted, TsdbResult& res) {
  // Only an admin-run cluster Prometheus is trusted; every other source is the job's own TSDB.
  const bool own_database = !trusted;
  Querier q(client);
  Scope scope(host_label, req.hosts);
  Discovery d;
  std::vector<QueryRecord> discovery_log;
  const bool ok =
      discover(q, scope, req, th, data_min, data_max, own_database, d, res, &discovery_log);
  res.available = res.metric_count > 0;
  if (!ok) return res.available;

  const GpuThresholds* chosen = nullptr;
  choose_gpu_model(q, scope, d, req, th, res, chosen);
  const GpuThresholds& g = chosen != nullptr ? *chosen : th.fallback();
  if (chosen == nullptr && !req.gpu_model.empty()) {
    res.notes.push_back("GPU model '" + printable(req.gpu_model) +
                        "' is not in gpu-thresholds.rules; power is judged "
                        "against the job's own training power");
  }
  Context ctx{req, q, scope, th, g, d, trusted, {}};
  for (int n : chosen_playbooks(req, res)) {
    if (q.broken()) {
      res.notes.push_back("the Prometheus server stopped answering; playbook " + std::to_string(n) +
                          " and later were skipped (" + q.last_error() + ")");
      break;
    }
    const PlaybookEntry* entry = find_playbook_entry(n);
    if (entry == nullptr) {
      res.notes.push_back("there is no playbook " + std::to_string(n) + " (1-7)");
      continue;
    }
    try {
      PlaybookResult& p = res.playbooks.emplace_back(entry->run(ctx, res.hardware));
      // A finding is as trustworthy as the database it was read from.
      for (auto& f : p.findings)
        f.trusted = trusted;
    } catch (const std::exception& e) {
      res.notes.push_back("playbook " + std::to_string(n) + " failed: " + e.what());
    }
  }
  if (!res.playbooks.empty())
    res.playbooks.front().evidence.insert(res.playbooks.front().evidence.begin(),
                                          discovery_log.begin(), discovery_log.end());
  for (const auto& p : res.playbooks) {
    size_t failed = 0;
    for (const auto& e : p.evidence)
      failed += !e.error.empty();
    if (failed > 0)
      res.notes.push_back("playbook " + std::to_string(p.number) + ": " + std::to_string(failed) +
                          " query(ies) failed");
  }
  build_chain(res, d, req, th);
  correlate(res, req);
  build_timeline(q, scope, d, req, g, res);
  for (const auto& p : res.playbooks) {
    for (const auto& s : p.next_steps)
      add_unique(res.recommendations, s);
  }
  for (const auto& v : res.hardware) {
    if (v.action == "drain" || v.action == "reboot-at-job-boundary") {
      add_unique(res.recommendations,
                 (v.action == "drain" ? "Drain " : "Reboot at the next job boundary: ") + v.host +
                     " — " + v.reason +
                     (v.source_trusted ? ""
                                       : " (from the job's own TSDB: confirm with the node's "
                                         "kernel log before acting)"));
    }
  }
  return true;
}

std::string local_hostname() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return {};
  return buf;
}

}  // namespace

TsdbResult run_tsdb_analysis(const TsdbRequest& request) {
  const int64_t t0 = monotonic_usec();
  const std::vector<std::string> layers =
      request.rule_layers.empty() ? default_rule_layers() : request.rule_layers;
  // A caller without the catalog at hand (slurm-triage tsdb --class) names only the class.
  TsdbRequest req = request;
  if (req.class_playbooks.empty())
    req.class_playbooks = catalog_class_playbooks(layers, req.triage_class);
  TsdbResult res;
  res.job_dir = req.job_dir;
  res.triage_class = req.triage_class;
  res.analysis_type = analysis_label(req.class_playbooks);
  const Thresholds th = load_thresholds(layers);
  for (const auto& e : th.errors)
    res.notes.push_back("thresholds catalog: " + std::string(e.what()));
  int requests = 0;
  auto finish = [&]() {
    res.queries = requests;
    res.elapsed_s = static_cast<double>(monotonic_usec() - t0) / 1e6;
    return res;
  };

  // 1. The cluster's Prometheus, scoped to the job's hosts and window.
  if (!req.cluster_url.empty()) {
    if (req.hosts.empty() || !req.job_start || !(req.job_end || req.failure_time)) {
      res.notes.push_back(
          "the cluster Prometheus needs the job's hosts and time window; not queried");
    } else {
      PromClient client(req.cluster_url, client_options(req));
      res.source.kind = "cluster";
      res.source.url = req.cluster_url;
      res.source.trusted = true;
      res.source.host_label = req.host_label;
      const bool used =
          analyse_source(client, req.host_label, req, th, std::nullopt, std::nullopt, true, res);
      requests += client.requests();
      if (used) return finish();
      res.notes.push_back(
          "the cluster Prometheus at " + req.cluster_url +
          " was unreachable or had no series for this job; trying the job's own TSDB");
      TsdbResult fresh;
      fresh.job_dir = req.job_dir;
      fresh.triage_class = req.triage_class;
      fresh.analysis_type = res.analysis_type;
      fresh.notes = res.notes;
      res = std::move(fresh);
    }
  }

  // 2. The job's own TSDB.
  if (req.job_dir.empty()) {
    res.notes.push_back("no job directory: no per-job TSDB to read");
    return finish();
  }
  const TsdbDirScan scan = scan_tsdb_dir(req.job_dir);
  res.source.path = scan.path;
  if (!scan.exists) {
    res.notes.push_back(
        "no prometheus/ directory in the job directory: the job ran without its metrics stack "
        "(RAY=0). "
        "Re-run with RAY=1 to get a TSDB for the next failure.");
    return finish();
  }
  if (!scan.error.empty()) {
    res.notes.push_back("cannot read " + scan.path + ": " + scan.error);
    return finish();
  }
  for (const auto& p : scan.problems)
    res.notes.push_back("TSDB: " + p);
  bool live = req.liveness == JobLiveness::kLive;
  if (scan.lock_holder) {
    if (req.liveness == JobLiveness::kFinished) {
      res.notes.push_back("the job is said to be finished, but process " +
                          std::to_string(*scan.lock_holder) +
                          " still holds the TSDB lock: treated as live");
    }
    live = true;
  }

  if (live && !req.head_host.empty() && req.head_port != 0) {
    // The live job's own Prometheus binds to loopback on its head node: reachable when we run
    // there, or through a tunnel the user opened.
    std::vector<std::string> urls = {"http://" + req.head_host + ":" +
                                     std::to_string(req.head_port)};
    const std::string me = local_hostname();
    if (req.head_host == me || me.rfind(req.head_host + ".", 0) == 0 ||
        req.head_host == "localhost") {
      urls.insert(urls.begin(), "http://127.0.0.1:" + std::to_string(req.head_port));
    }
    for (const auto& url : urls) {
      PromClient client(url, client_options(req));
      if (!client.ready(std::chrono::milliseconds(2000))) continue;
      res.source.kind = "live-head";
      res.source.url = url;
      const auto now = static_cast<double>(now_usec()) / 1e6;
      std::optional<double> dmin;
      if (auto m = scan.blocks_min_ms()) dmin = static_cast<double>(*m) / 1000;
      const bool used = analyse_source(client, "host", req, th, dmin, now, false, res);
      requests += client.requests();
      if (used || res.refused) return finish();
    }
    res.notes.push_back("the live job's Prometheus (" + req.head_host + ":" +
                        std::to_string(req.head_port) +
                        ") did not answer; reading the persisted blocks instead");
  }
  if (live) {
    res.notes.push_back(
        "live job: never touching its TSDB lock or write-ahead log; a private copy of the "
        "persisted "
        "blocks is read instead");
    if (scan.blocks.empty()) {
      res.notes.push_back(
          "the live job has no persisted block yet (Prometheus writes the first one about two "
          "hours "
          "after start): nothing can be read without its own server");
      return finish();
    }
  } else if (scan.empty()) {
    res.notes.push_back(
        "prometheus/ holds no data (no block and an empty write-ahead log): Prometheus never "
        "scraped, "
        "or failed to start; see prometheus/prometheus.log");
    return finish();
  }

  const std::string binary = find_executable(req.prometheus_binary);
  if (binary.empty()) {
    res.notes.push_back("no prometheus binary ('" + printable(req.prometheus_binary) +
                        "'); install the prometheus package to read the TSDB");
    return finish();
  }
  LaunchOptions lo;
  lo.binary = binary;
  lo.scratch_parent = req.scratch_dir;
  lo.label = req.job_id.empty() ? "job" : req.job_id;
  lo.ready_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(std::max(1.0, req.ready_timeout_s) * 1000));
  try {
    LocalPrometheus server(lo);
    CopyOptions co;
    co.include_wal = !live;
    co.max_bytes = req.max_copy_bytes;
    const CopyReport copied = copy_tsdb(scan, server.data_dir(), co);
    res.source.kind = live ? "job-tsdb-blocks" : "job-tsdb";
    res.source.wal_included = copied.wal_copied;
    res.source.copied_bytes = copied.bytes;
    if (live) {
      if (auto m = scan.blocks_max_ms()) {
        res.source.missing_from = static_cast<double>(*m) / 1000;
        res.notes.push_back("data after " + fmt_time(*res.source.missing_from) +
                            " is still in the live job's write-ahead log and is not visible here");
      }
    }
    server.start();
    res.source.url = server.url();
    res.source.startup_seconds = server.startup_seconds();
    PromClient client(server.url(), client_options(req));
    std::optional<double> dmin, dmax;
    if (auto m = scan.blocks_min_ms()) dmin = static_cast<double>(*m) / 1000;
    if (auto m = scan.blocks_max_ms()) dmax = static_cast<double>(*m) / 1000;
    try {
      const TsdbStatus st = client.tsdb_status();
      if (st.head_min_ms && st.head_max_ms) {
        const double hmin = static_cast<double>(*st.head_min_ms) / 1000;
        const double hmax = static_cast<double>(*st.head_max_ms) / 1000;
        dmin = dmin ? std::min(*dmin, hmin) : hmin;
        dmax = dmax ? std::max(*dmax, hmax) : hmax;
      }
    } catch (const PromError& e) {
      res.notes.push_back("status/tsdb: " + std::string(e.what()));
    }
    analyse_source(client, "host", req, th, dmin, dmax, false, res);
    requests += client.requests();
    if (!res.available && res.notes.empty())
      res.notes.push_back("the TSDB answered but holds no samples");
  } catch (const LaunchError& e) {
    res.notes.push_back(
        "could not start a private prometheus on the copy of the TSDB (corrupt or unreadable?): " +
        std::string(e.what()));
  } catch (const std::exception& e) {
    res.notes.push_back("could not copy the TSDB: " + std::string(e.what()));
  }
  return finish();
}

void apply_tsdb_config(const KvConfig& config, TsdbRequest& req) {
  req.cluster_url = config.get("PrometheusURL");
  req.host_label = config.get("PrometheusHostLabel");
  req.prometheus_binary = config.get("PrometheusBinary");
  req.scratch_dir = config.get("TsdbScratchDir");
  req.query_timeout_s = static_cast<double>(config.get_seconds("TsdbQueryTimeout"));
}

}  // namespace triage::tsdb
