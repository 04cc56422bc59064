#include "collector/sysfs/ib_port_watch.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "collector/kernel_rules.h"

namespace triage::collector {

namespace {

std::string gbps(double v) {
  char buf[32];
  (void)std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string state_words(const IbPort& p) {
  return "state " + (p.state.empty() ? std::string("?") : p.state) + ", phys_state " +
         (p.phys_state.empty() ? std::string("?") : p.phys_state);
}

Severity severity_of(const std::string& action) {
  return action == "drain" ? Severity::kError : Severity::kWarning;
}

// "12 h", "10 min", "90 s": a window as a site would write it.
std::string duration_words(int64_t s) {
  if (s % 3600 == 0) return std::to_string(s / 3600) + " h";
  if (s % 60 == 0) return std::to_string(s / 60) + " min";
  return std::to_string(s) + " s";
}

std::optional<uint64_t> link_downed(const IbPort& p) {
  const auto it = p.counters.find("link_downed");
  if (it == p.counters.end()) return std::nullopt;
  return it->second;
}

}  // namespace

IbPortWatch::IbPortWatch(std::string host, std::string boot_id, IbThresholds thresholds)
    : host_(std::move(host)), boot_id_(std::move(boot_id)), thresholds_(std::move(thresholds)) {}

std::vector<KernelEvent> IbPortWatch::update(const SysfsSnapshot& snap) {
  std::vector<KernelEvent> out;
  const int64_t now = snap.time_usec;
  auto event = [&](const IbPort& p, std::string id, const char* kind, Severity severity,
                   const std::string& action) -> KernelEvent& {
    KernelEvent e;
    e.id = std::move(id);
    e.kind = kind;
    e.severity = severity;
    e.action = action;
    e.rule = "sysfs-ib-port";
    e.device = p.name();
    e.time_usec = now;
    e.last_usec = now;
    e.count = 1;
    e.fields["port"] = p.name();
    e.fields["path"] = p.path;
    e.fields["state"] = p.state;
    e.fields["phys_state"] = p.phys_state;
    out.push_back(std::move(e));
    return out.back();
  };
  const std::string base = boot_id_ + ":";
  for (const IbPort& p : snap.ib) {
    PortMemory& m = ports_[p.name()];
    // A port that cannot be read says nothing about its state.
    if (!p.state.empty() || !p.phys_state.empty()) {
      const bool down = ib_port_down(p);
      if (down && !m.down) {
        m.down = true;
        m.down_since_usec = now;
        m.down_id = "ib-port-down:" + base + p.name() + ":" + std::to_string(now);
        m.still_since_usec = now;
        m.link_downed = link_downed(p);
        KernelEvent& e =
            event(p, m.down_id, "ib-port-down", Severity::kError, thresholds_.down_action);
        e.summary = "port " + p.name() + " is down (" + state_words(p) + ")";
        e.lines.push_back(p.path + ": " + state_words(p));
      } else if (down && m.down) {
        // GPUd's drop (scan_drops.go): down and link_downed unchanged for the whole period.
        if (link_downed(p) != m.link_downed) {
          m.still_since_usec = now;
          m.link_downed = link_downed(p);
        }
        if (!m.stuck && ib_is_stuck_down(m.still_since_usec, now, thresholds_)) {
          m.stuck = true;
          const int64_t down_s = (now - m.down_since_usec) / 1000000;
          KernelEvent& e =
              event(p, m.down_id, "ib-port-down", Severity::kError, thresholds_.stuck_action);
          e.time_usec = m.down_since_usec;
          if (thresholds_.stuck_remedy != "none") e.fields[kRemedyField] = thresholds_.stuck_remedy;
          e.summary = "port " + p.name() + " has been down for " + std::to_string(down_s) +
                      " s and does not come up (" + state_words(p) + ")";
          e.lines.push_back(p.path + ": " + state_words(p) + " for " + std::to_string(down_s) +
                            " s");
        }
      } else if (!down && m.down) {
        m.down = false;
        m.stuck = false;
        const int64_t down_s = (now - m.down_since_usec) / 1000000;
        KernelEvent& e =
            event(p, m.down_id, "ib-port-down", Severity::kError, thresholds_.down_action);
        e.time_usec = m.down_since_usec;
        e.summary = "port " + p.name() + " was down for " + std::to_string(down_s) +
                    " s, then came back (" + state_words(p) + ")";
        e.lines.push_back(p.path + ": down " + std::to_string(down_s) + " s, now " +
                          state_words(p));
        if (ib_is_flap(down_s, thresholds_)) {
          m.flaps_usec.push_back(now);
          const int64_t window_start = now - thresholds_.flap_window_s * 1000000;
          m.flaps_usec.erase(std::remove_if(m.flaps_usec.begin(), m.flaps_usec.end(),
                                            [&](int64_t f) { return f < window_start; }),
                             m.flaps_usec.end());
          const int64_t flaps = ib_flaps_in_window(m.flaps_usec, now, thresholds_);
          if (flaps >= thresholds_.flap_count) {
            const int64_t first = m.flaps_usec.front();
            KernelEvent& f =
                event(p, "ib-port-flap:" + base + p.name() + ":" + std::to_string(first),
                      "ib-port-flap", Severity::kError, thresholds_.flap_action);
            f.time_usec = m.down_since_usec;
            f.count = static_cast<uint64_t>(flaps);
            f.summary = "port " + p.name() + " flapped " + std::to_string(flaps) + " times in " +
                        duration_words(thresholds_.flap_window_s) +
                        " (down >= " + std::to_string(thresholds_.flap_down_min_s) +
                        " s, then back)";
            f.lines.push_back(f.summary);
          }
        }
      }
    }
    // Counters: cumulative since the driver loaded; a value lower than the last is a reset.
    const double elapsed_s =
        m.counters_usec > 0 ? static_cast<double>(now - m.counters_usec) / 1e6 : 0.0;
    for (const IbCounterLimit& l : thresholds_.counters) {
      const auto cur = p.counters.find(l.counter);
      if (cur == p.counters.end()) continue;
      const auto last = m.counters.find(l.counter);
      if (last == m.counters.end() || cur->second < last->second) continue;
      const uint64_t delta = cur->second - last->second;
      if (!ib_counter_over_limit(delta, elapsed_s, l)) continue;
      KernelEvent& e = event(p, "ib-port-errors:" + base + p.name() + ":" + l.counter,
                             "ib-port-errors", severity_of(l.action), l.action);
      e.count = cur->second;
      e.fields["counter"] = l.counter;
      e.summary = l.counter + " on port " + p.name() + " rose by " + std::to_string(delta) +
                  " in " + std::to_string(std::llround(elapsed_s)) + " s (limit " +
                  gbps(l.max_increase) + " per " + gbps(l.per_s) + " s)";
      e.lines.push_back(p.path + "/" +
                        (l.counter.rfind("hw_counters/", 0) == 0 ? "" : "counters/") + l.counter +
                        ": " + std::to_string(last->second) + " -> " + std::to_string(cur->second));
    }
    m.counters = p.counters;
    m.counters_usec = now;
  }
  for (const IbSlowPort& s : ib_ports_below_peers(snap.ib)) {
    const std::string key = s.port + "@" + gbps(s.rate_gbps);
    if (!slow_reported_.insert(key).second) continue;
    const auto p = std::find_if(snap.ib.begin(), snap.ib.end(),
                                [&](const IbPort& q) { return q.name() == s.port; });
    KernelEvent& e =
        event(*p, std::string("ib-port-rate:").append(base).append(key), "ib-port-rate",
              severity_of(thresholds_.rate_action), thresholds_.rate_action);
    e.summary = "port " + s.port + " runs at " + gbps(s.rate_gbps) + " Gb/s, its peers at " +
                gbps(s.peer_gbps) + " Gb/s";
    e.lines.push_back(e.summary);
  }
  for (KernelEvent& e : out) {
    e.host = host_;
    e.boot_id = boot_id_;
  }
  return out;
}

}  // namespace triage::collector
