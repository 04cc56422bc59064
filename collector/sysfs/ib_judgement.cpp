#include "collector/sysfs/ib_judgement.h"

#include <algorithm>
#include <map>

#include "common/text.h"

namespace triage::collector {

namespace {

bool known_action(const std::string& a) {
  return a == "investigate" || a == "drain";
}

// "NAME MAX-INCREASE PER-SECONDS [ACTION]"
std::optional<IbCounterLimit> parse_counter_limit(const std::string& value, std::string* why) {
  std::vector<std::string> words;
  for (std::string_view w : split(value, ' ')) {
    if (!trim(w).empty()) words.emplace_back(trim(w));
  }
  if (words.size() < 3 || words.size() > 4) {
    *why = "expected 'NAME MAX-INCREASE PER-SECONDS [investigate|drain]'";
    return std::nullopt;
  }
  IbCounterLimit l;
  l.counter = words[0];
  const auto max = parse_double(words[1]);
  const auto per = parse_double(words[2]);
  if (!max || *max < 0) {
    *why = "MAX-INCREASE '" + words[1] + "' is not a number >= 0";
    return std::nullopt;
  }
  if (!per || *per <= 0) {
    *why = "PER-SECONDS '" + words[2] + "' is not a number > 0";
    return std::nullopt;
  }
  l.max_increase = *max;
  l.per_s = *per;
  if (words.size() == 4) l.action = words[3];
  if (!known_action(l.action)) {
    *why = "action '" + l.action + "' is not investigate or drain";
    return std::nullopt;
  }
  return l;
}

}  // namespace

IbThresholdsLoad ib_thresholds_from(const std::vector<RuleSection>& sections) {
  IbThresholdsLoad out;
  const RuleSection* last = nullptr;
  for (const RuleSection& s : sections) {
    if (s.type == "ib-port-thresholds" && s.id == "default") last = &s;
  }
  if (last == nullptr) return out;
  IbThresholds& t = out.thresholds;
  for (const RuleEntry& e : last->entries) {
    auto seconds = [&](int64_t& field) {
      const auto v = parse_uint(trim(e.value));
      if (!v || *v == 0) {
        out.errors.push_back(last->error(e, e.key + " = '" + e.value + "': expected a count > 0"));
        return;
      }
      field = static_cast<int64_t>(*v);
    };
    auto action = [&](std::string& field) {
      const std::string v(trim(e.value));
      if (!known_action(v)) {
        out.errors.push_back(
            last->error(e, e.key + " = '" + e.value + "': expected investigate or drain"));
        return;
      }
      field = v;
    };
    if (e.key == "flap-down-min-s") {
      seconds(t.flap_down_min_s);
    } else if (e.key == "flap-count") {
      seconds(t.flap_count);
    } else if (e.key == "flap-window-s") {
      seconds(t.flap_window_s);
    } else if (e.key == "down-action") {
      action(t.down_action);
    } else if (e.key == "flap-action") {
      action(t.flap_action);
    } else if (e.key == "rate-action") {
      action(t.rate_action);
    } else if (e.key == "stuck-down-s") {
      seconds(t.stuck_down_s);
    } else if (e.key == "stuck-action") {
      action(t.stuck_action);
    } else if (e.key == "stuck-remedy") {
      const std::string v(trim(e.value));
      if (v == "reboot" || v == "none") {
        t.stuck_remedy = v;
      } else {
        out.errors.push_back(
            last->error(e, "stuck-remedy = '" + e.value + "': expected reboot or none"));
      }
    } else if (e.key == "counter") {
      std::string why;
      if (auto l = parse_counter_limit(e.value, &why)) {
        t.counters.push_back(std::move(*l));
      } else {
        out.errors.push_back(last->error(e, "counter = '" + e.value + "': " + why));
      }
    } else {
      out.errors.push_back(last->error(e, "unknown key '" + e.key + "' in [ib-port-thresholds]"));
    }
  }
  return out;
}

bool ib_port_down(const IbPort& p) {
  return (!p.state.empty() && p.state != "ACTIVE") ||
         (!p.phys_state.empty() && p.phys_state != "LinkUp");
}

std::vector<std::string> ib_ports_down(const std::vector<IbPort>& ports) {
  std::vector<std::string> out;
  for (const IbPort& p : ports) {
    if (ib_port_down(p)) out.push_back(p.name());
  }
  return out;
}

std::vector<IbSlowPort> ib_ports_below_peers(const std::vector<IbPort>& ports) {
  std::map<std::string, double> fastest;  // link layer -> rate
  for (const IbPort& p : ports) {
    if (ib_port_down(p) || !p.rate_gbps) continue;
    double& f = fastest[p.link_layer];
    f = std::max(f, *p.rate_gbps);
  }
  std::vector<IbSlowPort> out;
  for (const IbPort& p : ports) {
    if (ib_port_down(p) || !p.rate_gbps) continue;
    const double peer = fastest[p.link_layer];
    if (*p.rate_gbps < peer) out.push_back({p.name(), *p.rate_gbps, peer});
  }
  return out;
}

bool ib_is_flap(int64_t down_s, const IbThresholds& t) {
  return down_s >= t.flap_down_min_s;
}

bool ib_is_stuck_down(int64_t still_since_usec, int64_t now_usec, const IbThresholds& t) {
  return now_usec - still_since_usec >= t.stuck_down_s * 1000000;
}

int64_t ib_flaps_in_window(const std::vector<int64_t>& flap_usec, int64_t now_usec,
                           const IbThresholds& t) {
  const int64_t start = now_usec - t.flap_window_s * 1000000;
  return std::count_if(flap_usec.begin(), flap_usec.end(),
                       [&](int64_t f) { return f >= start && f <= now_usec; });
}

bool ib_counter_over_limit(uint64_t delta, double elapsed_s, const IbCounterLimit& limit) {
  if (delta == 0) return false;
  if (limit.max_increase <= 0) return true;
  // Over a poll longer than the limit's period the allowed count grows with it (the limit is a
  // rate); over a shorter one it stays whole, so that a single error is never a rate over 5/min.
  const double allowed = limit.max_increase * std::max(elapsed_s, limit.per_s) / limit.per_s;
  return static_cast<double>(delta) > allowed;
}

}  // namespace triage::collector
