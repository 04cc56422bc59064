// Playbook 6's judgement: network health and which nodes to exclude first.
#include <algorithm>
#include <cmath>

#include "analyzer/tsdb/playbook_network.h"
#include "analyzer/tsdb/playbook_table.h"
#include "common/text.h"

namespace triage::tsdb {

namespace {

using Ranked = std::vector<std::pair<int, std::string>>;  // (priority, host), most urgent first

Ranked rank(const NetworkMetrics& m, const NetworkThresholds& nt) {
  Ranked ranked;
  for (const auto& [h, n] : m.hosts) {
    const int p = exclusion_priority(n, nt.sustained_s);
    if (p > 0) ranked.emplace_back(p, h);
  }
  auto weight = [](const NetHost& n) {
    return n.retry_excd * 1e6 + n.ack_timeouts * 1e3 + n.retx_max + n.cnp_max + n.tcp_max;
  };
  std::sort(ranked.begin(), ranked.end(), [&](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    return weight(m.hosts.at(a.second)) > weight(m.hosts.at(b.second));
  });
  return ranked;
}

EvidenceTable ranking_table(const NetworkMetrics& m, const Ranked& ranked) {
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
    const auto& n = m.hosts.at(h);
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
  return t;
}

HardwareVerdict link_verdict(const NetworkMetrics& m, const std::string& h, const NetHost& n,
                             int p) {
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
                   (n.ack_timeouts > 0 ? " and " + fmt(n.ack_timeouts, 0) + " ACK timeouts" : "");
  v.metric = n.retry_excd > 0 ? "hw_rdma_req_tx_retry_excd_err_total"
             : p == 1         ? "hw_rdma_port_state"
                              : "hw_rdma_tx_retx_pkts_total";
  v.value = n.retry_excd > 0 ? n.retry_excd : n.retx_max;
  v.first_seen = n.first;
  v.source_trusted = m.source_trusted;
  return v;
}

// Link verdicts and anomalies for the hosts to exclude; CQE, NIC and TCP-abort findings for all.
void judge_hosts(const NetworkMetrics& m, const Ranked& ranked,
                 const std::vector<HardwareVerdict>& earlier, NetworkJudgement& j) {
  auto& r = j.result;
  for (const auto& ranked_host : ranked) {
    const int p = ranked_host.first;
    const std::string& h = ranked_host.second;
    const auto& n = m.hosts.at(h);
    if (p <= 2) {
      // A port the hardware playbook already reported down needs no second verdict.
      const bool have = std::any_of(earlier.begin(), earlier.end(), [&](const HardwareVerdict& v) {
        return v.host == h && v.metric == "hw_rdma_port_state" && n.retry_excd <= 0;
      });
      if (!have) j.verdicts.push_back(link_verdict(m, h, n, p));
      r.anomalies.push_back(Anomaly{
          .time = n.first.value_or(m.start),
          .host = h,
          .metric = p == 1 ? "hw_rdma_req_tx_retry_excd_err_total" : "hw_rdma_tx_retx_pkts_total",
          .domain = "network",
          .text = (p == 1 ? "RDMA packet loss (retry exhaustion / link down) on "
                          : "sustained RDMA retransmits on ") +
                  h});
    }
    if (n.cqe > 0)
      r.add_finding(Severity::kWarning, h + ": " + fmt(n.cqe, 0) + " RDMA CQE errors", {h},
                    std::nullopt);
    if (n.nic_errors > 0)
      r.add_finding(Severity::kWarning, h + ": " + fmt(n.nic_errors, 0) + " NIC errors", {h},
                    std::nullopt);
    if (n.tcp_aborts > 0) {
      r.add_finding(Severity::kWarning,
                    h + ": " + fmt(n.tcp_aborts, 0) + " TCP connections aborted on timeout", {h},
                    std::nullopt);
    }
  }
}

// Phase correlation: is throughput lower while the degraded links retransmit?
void throughput_finding(const NetworkMetrics& m, const std::vector<std::string>& degraded,
                        PlaybookResult& r) {
  if (degraded.empty() || m.tokens_per_s.empty()) return;
  std::vector<double> bad;
  for (const auto& h : degraded) {
    const auto& times = m.hosts.at(h).retx_times;
    bad.insert(bad.end(), times.begin(), times.end());
  }
  std::sort(bad.begin(), bad.end());
  std::vector<double> during, outside;
  for (const auto& p : m.tokens_per_s) {
    const bool in_checkpoint = std::any_of(m.checkpoints.begin(), m.checkpoints.end(),
                                           [&](const Interval& i) { return i.contains(p.t); });
    if (in_checkpoint || !std::isfinite(p.v)) continue;
    (std::binary_search(bad.begin(), bad.end(), p.t) ? during : outside).push_back(p.v);
  }
  if (during.size() < 3 || outside.size() < 3) return;
  const double a = median(during), b = median(outside);
  if (b > 0 && (b - a) / b >= 0.05) {
    r.add_finding(Severity::kWarning,
                  "throughput was " + fmt_pct(100 * (b - a) / b) + " lower while " +
                      list_names(degraded) + " retransmitted (" + fmt(a, 0) + " vs. " + fmt(b, 0) +
                      " tokens/s per device)",
                  degraded, std::nullopt);
  }
}

void conclude(const NetworkMetrics& m, const std::vector<std::vector<std::string>>& by_priority,
              PlaybookResult& r) {
  const auto& p1 = by_priority[1];
  const auto& p2 = by_priority[2];
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
  } else if (!by_priority[3].empty()) {
    r.verdict = "congestion";
    r.hosts = by_priority[3];
    r.summary = "Sustained congestion notifications on " + list_names(by_priority[3]) +
                ": switch-level congestion rather than a bad node (ECN/traffic tuning).";
  } else if (!by_priority[4].empty()) {
    r.verdict = "tcp-only";
    r.hosts = by_priority[4];
    r.summary = "Only TCP retransmits (outside checkpoint writes) on " +
                list_names(by_priority[4]) +
                ": the NFS/gRPC path, not the collectives' RDMA path. These nodes should not be "
                "excluded for it.";
  } else {
    r.verdict = "healthy";
    r.summary =
        "No RDMA errors, sustained retransmits, congestion or TCP trouble outside checkpoint "
        "writes on any of the " +
        std::to_string(m.job_hosts) + " hosts.";
  }
  if (!p1.empty() || !p2.empty()) {
    std::vector<std::string> ex = p1;
    ex.insert(ex.end(), p2.begin(), p2.end());
    r.next_steps.push_back("Resubmit with --exclude=" + join(ex, ",") +
                           " (in this order if spares are limited) and have the links checked "
                           "(cables, switch ports).");
  }
}

}  // namespace

int exclusion_priority(const NetHost& n, double sustained_s) {
  if (n.retry_excd > 0 || n.port_down) return 1;
  if (n.retx_sustained_s >= sustained_s || n.ack_timeouts > 0) return 2;
  if (n.cnp_sustained_s >= sustained_s) return 3;
  if (n.tcp_sustained_s >= sustained_s) return 4;
  return 0;
}

NetworkJudgement judge_network(const NetworkMetrics& m, const NetworkThresholds& nt,
                               const std::vector<HardwareVerdict>& earlier) {
  NetworkJudgement j{new_playbook("network-health"), {}};
  auto& r = j.result;
  r.window_start = m.start;
  r.window_end = m.end;
  const Ranked ranked = rank(m, nt);
  EvidenceTable t = ranking_table(m, ranked);
  if (!t.rows.empty()) r.tables.push_back(std::move(t));
  judge_hosts(m, ranked, earlier, j);
  std::vector<std::vector<std::string>> by_priority(5);
  for (const auto& [p, h] : ranked)
    by_priority.at(static_cast<size_t>(p)).push_back(h);
  throughput_finding(m, by_priority[2], r);
  conclude(m, by_priority, r);
  return j;
}

}  // namespace triage::tsdb
