// Playbook 6's queries: per-host RDMA, NIC and TCP counters, read only as rates and increases
// inside the job window (playbook_network_judge.cpp decides).
#include <algorithm>
#include <cmath>

#include "analyzer/tsdb/playbook_network.h"

namespace triage::tsdb {

namespace {

struct Reader {
  Context& ctx;
  NetworkMetrics& m;
  std::vector<QueryRecord>* ev;
  std::string w;     // the whole window
  std::string rw;    // the rate window
  double step = 15;  // range resolution

  std::string by(bool rdma) const {
    const std::string hl = ctx.scope.host_label();
    return rdma ? "sum by (" + hl + ", device, port) " : "sum by (" + hl + ") ";
  }

  void increases(const char* metric, double NetHost::*field, bool rdma) {
    if (!ctx.disc.has(metric)) return;
    for (const auto& s : ctx.q.instant(
             cat(by(rdma), "(increase(", ctx.scope.sel(metric), w, ")) > 0"), ctx.disc.end, ev)) {
      auto& n = m.hosts[ctx.scope.host_of(s.labels)];
      n.*field += s.point.v;
      if (rdma) add_unique(n.devices, device_of(s.labels));
    }
  }

  // Rates above their threshold, over time: how long each host stayed above.
  void sustained(const char* metric, double threshold, double NetHost::*max_field,
                 double NetHost::*secs, bool rdma, bool skip_checkpoints) {
    const auto& d = ctx.disc;
    if (!d.has(metric)) return;
    const bool retx = rdma && std::string(metric) == "hw_rdma_tx_retx_pkts_total";
    for (const auto& s :
         ctx.q.range(cat(by(rdma), "(rate(", ctx.scope.sel(metric), rw, ")) > ", fmt(threshold, 3)),
                     d.start, d.end, step, ev)) {
      auto& n = m.hosts[ctx.scope.host_of(s.labels)];
      for (const auto& p : s.points) {
        if (skip_checkpoints && d.in_checkpoint(p.t)) continue;
        n.*max_field = std::max(n.*max_field, p.v);
        n.*secs += step;
        if (retx) {
          n.retx_times.push_back(p.t);
          if (!n.first || p.t < *n.first) n.first = p.t;
        }
      }
      if (rdma && !s.points.empty()) add_unique(n.devices, device_of(s.labels));
    }
  }

  void ports_down() {
    if (!ctx.disc.has("hw_rdma_port_state")) return;
    for (const auto& s :
         ctx.q.instant("min_over_time(" + ctx.scope.sel("hw_rdma_port_state") + w + ") == 0",
                       ctx.disc.end, ev)) {
      auto& n = m.hosts[ctx.scope.host_of(s.labels)];
      n.port_down = true;
      add_unique(n.devices, device_of(s.labels));
    }
  }

  // When retry exhaustion started, for the chain.
  void retry_exhaustion_start() {
    for (auto& [h, n] : m.hosts) {
      if (n.retry_excd <= 0) continue;
      for (const auto& s : ctx.q.range(
               "sum(increase(" + ctx.scope.sel_hosts("hw_rdma_req_tx_retry_excd_err_total", {h}) +
                   "[" + dur(2 * step) + "])) > 0",
               ctx.disc.start, ctx.disc.end, step, ev)) {
        if (!s.points.empty() && (!n.first || s.points.front().t < *n.first))
          n.first = s.points.front().t;
      }
    }
  }

  // Throughput over time, to compare while the degraded links retransmitted with the rest.
  void throughput() {
    const double sustained_s = ctx.th.network.sustained_s;
    const bool degraded = std::any_of(m.hosts.begin(), m.hosts.end(), [&](const auto& hn) {
      return exclusion_priority(hn.second, sustained_s) == 2;
    });
    if (!degraded || !ctx.disc.has("tb_perf_per_device_tokens_per_sec")) return;
    for (const auto& s :
         ctx.q.range("avg(" + ctx.scope.sel("tb_perf_per_device_tokens_per_sec") + ")",
                     ctx.disc.start, ctx.disc.end, step, ev)) {
      m.tokens_per_s.insert(m.tokens_per_s.end(), s.points.begin(), s.points.end());
    }
  }
};

}  // namespace

NetworkMetrics gather_network(Context& ctx, std::vector<QueryRecord>* ev) {
  const auto& d = ctx.disc;
  const auto& nt = ctx.th.network;
  NetworkMetrics m;
  m.start = d.start;
  m.end = d.end;
  m.job_hosts = d.hosts.size();
  m.source_trusted = ctx.source_trusted;
  for (const auto& [ck, iv] : d.checkpoints)
    m.checkpoints.push_back(iv);
  const double span = d.end - d.start;
  Reader rd{ctx,
            m,
            ev,
            range_window(span),
            range_window(std::min(300.0, std::max(span / 2, 2 * d.scrape_s))),
            std::max(d.scrape_s, std::ceil(span / 720))};
  rd.increases("hw_rdma_req_tx_retry_excd_err_total", &NetHost::retry_excd, true);
  rd.increases("hw_rdma_tx_ack_timeout_total", &NetHost::ack_timeouts, true);
  rd.increases("hw_rdma_req_rx_cqe_err_total", &NetHost::cqe, true);
  rd.increases("hw_net_rx_errors_total", &NetHost::nic_errors, false);
  rd.increases("hw_net_tx_errors_total", &NetHost::nic_errors, false);
  rd.increases("hw_tcp_abort_on_timeout_total", &NetHost::tcp_aborts, false);
  rd.sustained("hw_rdma_tx_retx_pkts_total", nt.rdma_retx_per_s, &NetHost::retx_max,
               &NetHost::retx_sustained_s, true, false);
  rd.sustained("hw_rdma_rx_cnp_pkts_total", nt.cnp_per_s, &NetHost::cnp_max,
               &NetHost::cnp_sustained_s, false, false);
  // NFS retransmits while checkpoints are written are expected; only the rest counts.
  rd.sustained("hw_tcp_retransmits_total", nt.tcp_retrans_per_s, &NetHost::tcp_max,
               &NetHost::tcp_sustained_s, false, true);
  rd.ports_down();
  rd.retry_exhaustion_start();
  rd.throughput();
  return m;
}

PlaybookResult run_network(Context& ctx, std::vector<HardwareVerdict>& verdicts) {
  std::vector<QueryRecord> evidence;
  const NetworkMetrics m = gather_network(ctx, &evidence);
  NetworkJudgement j = judge_network(m, ctx.th.network, verdicts);
  j.result.evidence = std::move(evidence);
  verdicts.insert(verdicts.end(), j.verdicts.begin(), j.verdicts.end());
  return std::move(j.result);
}

}  // namespace triage::tsdb
