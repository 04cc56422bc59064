// Network events around an incident: counters only through increase()/rate() inside the window,
// compared with the same counters' rate earlier in the job (RDMA counters are cumulative since
// boot, so an absolute value says nothing about this job).
#include <algorithm>
#include <cmath>

#include "analyzer/tsdb/playbook_context.h"

namespace triage::tsdb {

std::map<std::string, double> by_host(const Scope& scope, const std::vector<Sample>& samples) {
  std::map<std::string, double> out;
  for (const auto& s : samples)
    out[scope.host_of(s.labels)] += s.point.v;
  return out;
}

std::string by_host_sum(const Scope& scope, const std::string& expr) {
  return by_host_agg(scope, "sum", expr);
}

std::string by_host_agg(const Scope& scope, const std::string& agg, const std::string& expr) {
  return agg + " by (" + scope.host_label() + ") (" + expr + ")";
}

namespace {

struct CounterSpec {
  const char* metric;
  const char* what;
  bool rdma;
  bool any_is_event;  // any increase is an event (errors), not only a rise above the baseline
};

constexpr CounterSpec kCounters[] = {
    {"hw_rdma_req_tx_retry_excd_err_total", "RDMA retry exhaustion", true, true},
    {"hw_rdma_tx_ack_timeout_total", "RDMA ACK timeouts", true, true},
    {"hw_rdma_tx_retx_pkts_total", "RDMA retransmits", true, false},
    {"hw_tcp_retransmits_total", "TCP retransmits", false, false},
};

}  // namespace

std::vector<NetEvent> find_network_events(Context& ctx, double from, double to,
                                          std::vector<QueryRecord>* sink) {
  std::vector<NetEvent> out;
  const auto& d = ctx.disc;
  const auto& nt = ctx.th.network;
  from = std::max(from, d.start);
  to = std::min(to, d.end);
  const double len = to - from;
  if (len < 2 * d.scrape_s) return out;
  const double base_end = from;
  const double base_start = std::max(d.start, from - 3600);
  const bool have_base = base_end - base_start >= 300;

  for (const auto& c : kCounters) {
    if (!d.has(c.metric)) continue;
    const std::string sel = ctx.scope.sel(c.metric);
    const std::string by = c.rdma ? "sum by (" + ctx.scope.host_label() + ", device, port) "
                                  : "sum by (" + ctx.scope.host_label() + ") ";
    auto inc = ctx.q.instant(cat(by, "(increase(", sel, "[", dur(len), "])) > 0"), to, sink);
    if (inc.empty()) continue;
    std::map<std::string, double> base;
    if (have_base) {
      for (const auto& s : ctx.q.instant(
               cat(by, "(rate(", sel, "[", dur(base_end - base_start), "]))"), base_end, sink)) {
        base[ctx.scope.host_of(s.labels) + "|" + device_of(s.labels)] = s.point.v;
      }
    }
    for (const auto& s : inc) {
      NetEvent e;
      e.host = ctx.scope.host_of(s.labels);
      e.device = device_of(s.labels);
      e.metric = c.metric;
      e.what = c.what;
      e.amount = s.point.v;
      e.baseline = base.count(e.host + "|" + e.device) != 0 ? base[e.host + "|" + e.device] : 0;
      const double rate = e.amount / len;
      bool event = false;
      if (c.any_is_event) {
        event =
            e.baseline * len * nt.spike_factor < e.amount;  // errors well above their usual trickle
      } else if (c.rdma) {
        event = rate > nt.rdma_retx_per_s && rate > nt.spike_factor * e.baseline;
      } else {
        event = rate > nt.tcp_retrans_per_s && rate > nt.spike_factor * e.baseline;
      }
      if (!event) continue;
      // When it started: the first evaluation step with a rate above the baseline.
      const std::string one =
          ctx.scope.sel_hosts(c.metric, {e.host}, c.rdma ? device_matcher(s.labels) : "");
      const double step = std::max(d.scrape_s, std::ceil(len / 240));
      auto rs = ctx.q.range("sum(rate(" + one + "[" + dur(std::max(2 * d.scrape_s, 60.0)) + "]))",
                            from, to, step, sink);
      e.time = to;
      const double floor = std::max(e.baseline * nt.spike_factor,
                                    c.rdma || c.any_is_event ? 0.0 : nt.tcp_retrans_per_s);
      for (const auto& ser : rs) {
        if (auto t = first_time(ser, [&](double v) { return v > floor; }))
          e.time = std::min(e.time, *t);
      }
      // TCP retransmits while a checkpoint is written are NFS doing its job, not an incident.
      if (!c.rdma && d.in_checkpoint(e.time)) continue;
      out.push_back(std::move(e));
    }
  }
  if (d.has("hw_rdma_port_state")) {
    const std::string sel = ctx.scope.sel("hw_rdma_port_state");
    auto down = ctx.q.instant("min_over_time(" + sel + "[" + dur(len) + "]) == 0", to, sink);
    for (const auto& s : down) {
      NetEvent e;
      e.host = ctx.scope.host_of(s.labels);
      e.device = device_of(s.labels);
      e.metric = "hw_rdma_port_state";
      e.what = "RDMA port down";
      e.time = to;
      auto rs = ctx.q.range(
          ctx.scope.sel_hosts("hw_rdma_port_state", {e.host}, device_matcher(s.labels)) + " == 0",
          from, to, std::max(d.scrape_s, std::ceil(len / 1000)), sink);
      for (const auto& ser : rs) {
        if (!ser.points.empty()) e.time = std::min(e.time, ser.points.front().t);
      }
      out.push_back(std::move(e));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const NetEvent& a, const NetEvent& b) { return a.time < b.time; });
  return out;
}

}  // namespace triage::tsdb
