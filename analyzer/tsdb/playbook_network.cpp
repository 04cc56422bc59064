// Playbook 6: network health and which nodes to exclude first. RDMA carries the collectives, so
// its errors rank above everything; TCP retransmits alone (NFS, gRPC) never justify excluding a
// node. Counters are read only as rates and increases inside the job window.
#include <algorithm>
#include <cmath>

#include "analyzer/tsdb/playbook_context.h"
#include "analyzer/tsdb/playbook_table.h"
#include "common/text.h"

namespace triage::tsdb {

namespace {

struct NetHost {
  double retry_excd = 0, ack_timeouts = 0, cqe = 0, nic_errors = 0, tcp_aborts = 0;
  double retx_max = 0, retx_sustained_s = 0;
  double cnp_max = 0, cnp_sustained_s = 0;
  double tcp_max = 0, tcp_sustained_s = 0;
  bool port_down = false;
  std::optional<double> first;  // earliest RDMA trouble
  std::vector<std::string> devices;
  std::vector<double> retx_times;
};

int priority(const NetHost& n, double sustained) {
  if (n.retry_excd > 0 || n.port_down) return 1;
  if (n.retx_sustained_s >= sustained || n.ack_timeouts > 0) return 2;
  if (n.cnp_sustained_s >= sustained) return 3;
  if (n.tcp_sustained_s >= sustained) return 4;
  return 0;
}

}  // namespace

PlaybookResult run_network(Context& ctx, std::vector<HardwareVerdict>& verdicts) {
  PlaybookResult r = new_playbook("network-health");
  const auto& d = ctx.disc;
  const auto& nt = ctx.th.network;
  auto* ev = &r.evidence;
  r.window_start = d.start;
  r.window_end = d.end;
  const double span = d.end - d.start;
  const std::string w = "[" + dur(span) + "]";
  const std::string hl = ctx.scope.host_label();
  std::map<std::string, NetHost> hosts;

  auto increases = [&](const char* metric, double NetHost::*field, bool rdma) {
    if (!d.has(metric)) return;
    const std::string by = rdma ? "sum by (" + hl + ", device, port) " : "sum by (" + hl + ") ";
    for (const auto& s :
         ctx.q.instant(cat(by, "(increase(", ctx.scope.sel(metric), w, ")) > 0"), d.end, ev)) {
      auto& n = hosts[ctx.scope.host_of(s.labels)];
      n.*field += s.point.v;
      if (rdma) add_unique(n.devices, device_of(s.labels));
    }
  };
  increases("hw_rdma_req_tx_retry_excd_err_total", &NetHost::retry_excd, true);
  increases("hw_rdma_tx_ack_timeout_total", &NetHost::ack_timeouts, true);
  increases("hw_rdma_req_rx_cqe_err_total", &NetHost::cqe, true);
  increases("hw_net_rx_errors_total", &NetHost::nic_errors, false);
  increases("hw_net_tx_errors_total", &NetHost::nic_errors, false);
  increases("hw_tcp_abort_on_timeout_total", &NetHost::tcp_aborts, false);

  // Rates above their threshold, over time: how long each host stayed above.
  const double step = std::max(d.scrape_s, std::ceil(span / 720));
  const std::string rw = "[" + dur(std::min(300.0, std::max(span / 2, 2 * d.scrape_s))) + "]";
  auto sustained = [&](const char* metric, double threshold, double NetHost::*max_field,
                       double NetHost::*secs, bool rdma, bool skip_checkpoints) {
    if (!d.has(metric)) return;
    const std::string by = rdma ? "sum by (" + hl + ", device, port) " : "sum by (" + hl + ") ";
    for (const auto& s :
         ctx.q.range(cat(by, "(rate(", ctx.scope.sel(metric), rw, ")) > ", fmt(threshold, 3)),
                     d.start, d.end, step, ev)) {
      auto& n = hosts[ctx.scope.host_of(s.labels)];
      for (const auto& p : s.points) {
        if (skip_checkpoints && d.in_checkpoint(p.t)) continue;
        n.*max_field = std::max(n.*max_field, p.v);
        n.*secs += step;
        if (rdma && std::string(metric) == "hw_rdma_tx_retx_pkts_total") {
          n.retx_times.push_back(p.t);
          if (!n.first || p.t < *n.first) n.first = p.t;
        }
      }
      if (rdma && !s.points.empty()) add_unique(n.devices, device_of(s.labels));
    }
  };
  sustained("hw_rdma_tx_retx_pkts_total", nt.rdma_retx_per_s, &NetHost::retx_max,
            &NetHost::retx_sustained_s, true, false);
  sustained("hw_rdma_rx_cnp_pkts_total", nt.cnp_per_s, &NetHost::cnp_max, &NetHost::cnp_sustained_s,
            false, false);
  // NFS retransmits while checkpoints are written are expected; only the rest counts.
  sustained("hw_tcp_retransmits_total", nt.tcp_retrans_per_s, &NetHost::tcp_max,
            &NetHost::tcp_sustained_s, false, true);
  if (d.has("hw_rdma_port_state")) {
    for (const auto& s : ctx.q.instant(
             "min_over_time(" + ctx.scope.sel("hw_rdma_port_state") + w + ") == 0", d.end, ev)) {
      auto& n = hosts[ctx.scope.host_of(s.labels)];
      n.port_down = true;
      add_unique(n.devices, device_of(s.labels));
    }
  }
  // When retry exhaustion started, for the chain.
  for (auto& [h, n] : hosts) {
    if (n.retry_excd <= 0) continue;
    for (const auto& s : ctx.q.range(
             "sum(increase(" + ctx.scope.sel_hosts("hw_rdma_req_tx_retry_excd_err_total", {h}) +
                 "[" + dur(2 * step) + "])) > 0",
             d.start, d.end, step, ev)) {
      if (!s.points.empty() && (!n.first || s.points.front().t < *n.first))
        n.first = s.points.front().t;
    }
  }

  std::vector<std::pair<int, std::string>> ranked;
  for (const auto& [h, n] : hosts) {
    const int p = priority(n, nt.sustained_s);
    if (p > 0) ranked.emplace_back(p, h);
  }
  std::sort(ranked.begin(), ranked.end(), [&](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    const auto& na = hosts[a.second];
    const auto& nb = hosts[b.second];
    const double ma =
        na.retry_excd * 1e6 + na.ack_timeouts * 1e3 + na.retx_max + na.cnp_max + na.tcp_max;
    const double mb =
        nb.retry_excd * 1e6 + nb.ack_timeouts * 1e3 + nb.retx_max + nb.cnp_max + nb.tcp_max;
    return ma > mb;
  });

  EvidenceTable t;
  t.title = "Exclusion priority (1 = exclude first; TCP-only nodes are never excluded)";
  t.columns = {"Priority",     "Host",
               "Devices",      "RDMA retry exhaustion",
               "ACK timeouts", "RDMA retransmits (max, time above threshold)",
               "CNP (max)",    "TCP retransmits outside checkpoints (max, for)",
               "Exclude?"};
  static const char* const kWhy[] = {"", "hard link failure", "link degradation", "congestion",
                                     "TCP only"};
  for (const auto& [p, h] : ranked) {
    const auto& n = hosts[h];
    t.rows.push_back(
        {std::to_string(p) + " (" + kWhy[p] + ")", h, n.devices.empty() ? "–" : join(n.devices),
         fmt(n.retry_excd, 0) + (n.port_down ? " (port down)" : ""), fmt(n.ack_timeouts, 0),
         n.retx_sustained_s > 0 ? fmt_rate(n.retx_max) + ", " + format_duration(n.retx_sustained_s)
                                : "–",
         n.cnp_max > 0 ? fmt_rate(n.cnp_max) : "–",
         n.tcp_sustained_s > 0 ? fmt_rate(n.tcp_max) + ", " + format_duration(n.tcp_sustained_s)
                               : "–",
         p <= 2   ? "yes"
         : p == 3 ? "investigate the switch"
                  : "no"});
  }
  if (t.rows.size() > 32) t.rows.resize(32);
  if (!t.rows.empty()) r.tables.push_back(std::move(t));

  std::vector<std::string> p1, p2, p3, p4;
  for (const auto& ranked_host : ranked) {
    const int p = ranked_host.first;
    const std::string& h = ranked_host.second;
    (p == 1 ? p1 : p == 2 ? p2 : p == 3 ? p3 : p4).push_back(h);
    const auto& n = hosts[h];
    if (p <= 2) {
      const bool have =
          std::any_of(verdicts.begin(), verdicts.end(), [&](const HardwareVerdict& v) {
            return v.host == h && v.metric == "hw_rdma_port_state" && n.retry_excd <= 0;
          });
      if (!have) {
        HardwareVerdict v;
        v.host = h;
        v.component = "rdma " + (n.devices.empty() ? std::string("link") : join(n.devices));
        v.verdict = p == 1 ? "link-fault" : "degrading";
        v.action = p == 1 ? "drain" : "exclude-from-jobs";
        v.reason =
            p == 1 ? (n.retry_excd > 0
                          ? fmt(n.retry_excd, 0) + " RDMA retry-exhaustion errors (packets lost)"
                          : "RDMA port down")
                   : "sustained RDMA retransmits (" + fmt_rate(n.retx_max) + " max)" +
                         (n.ack_timeouts > 0 ? " and " + fmt(n.ack_timeouts, 0) + " ACK timeouts"
                                             : "");
        v.metric = n.retry_excd > 0 ? "hw_rdma_req_tx_retry_excd_err_total"
                   : p == 1         ? "hw_rdma_port_state"
                                    : "hw_rdma_tx_retx_pkts_total";
        v.value = n.retry_excd > 0 ? n.retry_excd : n.retx_max;
        v.first_seen = n.first;
        v.source_trusted = ctx.source_trusted;
        verdicts.push_back(v);
      }
      Anomaly a{
          .time = n.first.value_or(d.start),
          .host = h,
          .metric = p == 1 ? "hw_rdma_req_tx_retry_excd_err_total" : "hw_rdma_tx_retx_pkts_total",
          .domain = "network"};
      a.text = (p == 1 ? "RDMA packet loss (retry exhaustion / link down) on "
                       : "sustained RDMA retransmits on ") +
               h;
      r.anomalies.push_back(a);
    }
    if (n.cqe > 0)
      r.findings.push_back(
          {"warning", h + ": " + fmt(n.cqe, 0) + " RDMA CQE errors", {h}, std::nullopt});
    if (n.nic_errors > 0)
      r.findings.push_back(
          {"warning", h + ": " + fmt(n.nic_errors, 0) + " NIC errors", {h}, std::nullopt});
    if (n.tcp_aborts > 0) {
      r.findings.push_back({"warning",
                            h + ": " + fmt(n.tcp_aborts, 0) + " TCP connections aborted on timeout",
                            {h},
                            std::nullopt});
    }
  }

  // Phase correlation: is throughput lower while the degraded links retransmit?
  if (!p2.empty() && d.has("tb_perf_per_device_tokens_per_sec")) {
    std::vector<double> during, outside;
    auto tgs = ctx.q.range("avg(" + ctx.scope.sel("tb_perf_per_device_tokens_per_sec") + ")",
                           d.start, d.end, step, ev);
    std::vector<double> bad;
    for (const auto& h : p2)
      bad.insert(bad.end(), hosts[h].retx_times.begin(), hosts[h].retx_times.end());
    std::sort(bad.begin(), bad.end());
    for (const auto& s : tgs) {
      for (const auto& p : s.points) {
        if (d.in_checkpoint(p.t) || !std::isfinite(p.v)) continue;
        const bool in = std::binary_search(bad.begin(), bad.end(), p.t);
        (in ? during : outside).push_back(p.v);
      }
    }
    if (during.size() >= 3 && outside.size() >= 3) {
      const double a = median(during), b = median(outside);
      if (b > 0 && (b - a) / b >= 0.05) {
        r.findings.push_back({"warning",
                              "throughput was " + fmt_pct(100 * (b - a) / b) + " lower while " +
                                  list_names(p2) + " retransmitted (" + fmt(a, 0) + " vs. " +
                                  fmt(b, 0) + " tokens/s per device)",
                              p2, std::nullopt});
      }
    }
  }

  if (!p1.empty()) {
    r.verdict = "rdma-link-failure";
    r.hosts = p1;
    r.summary =
        list_names(p1) +
        " lost RDMA packets for good (retry exhaustion or a port down): a hard link failure. "
        "Exclude these first" +
        (p2.empty() ? "." : "; then " + list_names(p2) + " (sustained retransmits).");
  } else if (!p2.empty()) {
    r.verdict = "rdma-degraded";
    r.hosts = p2;
    r.summary =
        list_names(p2) +
        " retransmitted on RDMA for a sustained time: a degraded link slows every collective of "
        "the job. Exclude these nodes (or fix their links) first.";
  } else if (!p3.empty()) {
    r.verdict = "congestion";
    r.hosts = p3;
    r.summary = "Sustained congestion notifications on " + list_names(p3) +
                ": switch-level congestion rather than a bad node (ECN/traffic tuning).";
  } else if (!p4.empty()) {
    r.verdict = "tcp-only";
    r.hosts = p4;
    r.summary = "Only TCP retransmits (outside checkpoint writes) on " + list_names(p4) +
                ": the NFS/gRPC path, not the collectives' RDMA path. These nodes should not be "
                "excluded for it.";
  } else {
    r.verdict = "healthy";
    r.summary =
        "No RDMA errors, sustained retransmits, congestion or TCP trouble outside checkpoint "
        "writes on any of the " +
        std::to_string(d.hosts.size()) + " hosts.";
  }
  if (!p1.empty() || !p2.empty()) {
    std::vector<std::string> ex = p1;
    ex.insert(ex.end(), p2.begin(), p2.end());
    r.next_steps.push_back("Resubmit with --exclude=" + join(ex, ",") +
                           " (in this order if spares are limited) and have "
                           "the links checked (cables, switch ports).");
  }
  return r;
}

}  // namespace triage::tsdb
