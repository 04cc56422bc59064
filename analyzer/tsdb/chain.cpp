// From anomalies to an explanation: the earliest deviation near the incident is the root-cause
// candidate, what deviated after it are effects and symptoms. And what that says about the log
// triage's classification.
#include "analyzer/tsdb/chain.h"

#include <algorithm>
#include <cmath>

#include "analyzer/tsdb/playbook_table.h"

namespace triage::tsdb {

namespace {

std::string describe(const Anomaly& a) {
  return a.text + " (" + fmt_time(a.time) + ")";
}

const PlaybookResult* find_playbook(const TsdbResult& res, const std::string& id) {
  for (const auto& p : res.playbooks) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

}  // namespace

std::optional<double> incident_time(const TsdbRequest& req, const Discovery& d) {
  // A hang starts at its last completed step; the job's end (a cancel) can be hours later.
  if (hands_off_to(req, "hang")) {
    if (req.last_step_time) return req.last_step_time;
    if (d.last_step_change) return d.last_step_change;
  }
  return req.failure_time;
}

void build_chain(TsdbResult& res, const Discovery& d, const TsdbRequest& req,
                 const Thresholds& th) {
  const auto incident = incident_time(req, d);
  double lo = d.start, hi = d.end;
  if (incident) {
    lo = std::max(d.start, *incident - std::max(th.network.lead_s, 1800.0));
    hi = std::min(d.end, *incident + 300);
  }
  std::vector<Anomaly> all;
  for (const auto& p : res.playbooks) {
    for (const auto& a : p.anomalies) {
      if (a.during_checkpoint || a.time < lo || a.time > hi) continue;
      all.push_back(a);
    }
  }
  // Same time: a cause sorts before a symptom.
  std::stable_sort(all.begin(), all.end(), [](const Anomaly& a, const Anomaly& b) {
    if (a.time != b.time) return a.time < b.time;
    return a.kind == "cause" && b.kind != "cause";
  });
  auto& c = res.chain;
  c = RootCauseChain{};
  auto root =
      std::find_if(all.begin(), all.end(), [](const Anomaly& a) { return a.kind == "cause"; });
  if (root == all.end() && !all.empty()) root = all.begin();
  if (root == all.end()) {
    c.text = incident ? "No metric deviated in the half hour before the incident."
                      : "No anomaly in the window.";
    return;
  }
  c.root = *root;
  for (auto it = all.begin(); it != all.end(); ++it) {
    if (it == root || it->time < root->time) continue;
    (it->kind == "cause" ? c.effects : c.symptoms).push_back(*it);
  }
  // Drop repeats of the same deviation on the same host (a spike seen by two playbooks).
  auto dedupe = [&](std::vector<Anomaly>& v) {
    std::vector<Anomaly> out = {*c.root};
    for (const auto& a : v) {
      const bool seen = std::any_of(out.begin(), out.end(), [&](const Anomaly& b) {
        return b.metric == a.metric && b.host == a.host;
      });
      if (!seen) out.push_back(a);
    }
    out.erase(out.begin());
    v = std::move(out);
  };
  dedupe(c.effects);
  dedupe(c.symptoms);
  if (c.root->kind != "cause") {
    c.text = "No earlier anomaly in any metric family: the first deviation is a symptom, " +
             describe(*c.root) + ".";
  } else {
    c.text = "Root cause (earliest anomaly): " + describe(*c.root) + ".";
  }
  auto list = [](const std::vector<Anomaly>& v) {
    std::vector<std::string> s;
    for (size_t i = 0; i < v.size() && i < 6; ++i)
      s.push_back(describe(v[i]));
    if (v.size() > 6) s.push_back("and " + std::to_string(v.size() - 6) + " more");
    return join(s, "; ");
  };
  if (!c.effects.empty()) c.text += " → Effects: " + list(c.effects) + ".";
  if (!c.symptoms.empty()) c.text += " → Symptoms: " + list(c.symptoms) + ".";
  if (incident) {
    c.text += " → The incident the log shows" +
              (req.triage_class.empty() ? "" : " (" + req.triage_class + ")") + " at " +
              fmt_time(*incident) + ".";
  }
}

void correlate(TsdbResult& res, const TsdbRequest& req) {
  auto& c = res.correlation;
  c.triage_class = res.triage_class;
  const std::string& k = res.triage_class;
  if (k.empty()) {
    c.stance = "none";
    c.text = "No triage classification was handed over; this is a health check.";
    return;
  }
  auto verdict_of = [&](const std::string& id) {
    const auto* p = find_playbook(res, id);
    return p == nullptr ? std::string() : p->verdict;
  };
  auto hosts_of = [&](const std::string& id) {
    const auto* p = find_playbook(res, id);
    return p == nullptr ? std::string() : list_names(p->hosts);
  };
  const std::string intro = "Triage classified this as " + k + ". ";
  // The class is judged by what it hands off to: a network class (network-health) and a silent
  // death (oom and hardware) read the shared fault verdicts differently.
  const bool to_hang = hands_off_to(req, "hang");
  const bool to_heartbeat = hands_off_to(req, "heartbeat");
  const bool to_oom = hands_off_to(req, "oom");
  const bool to_hardware = hands_off_to(req, "hardware");
  const bool to_network = hands_off_to(req, "network-health");
  if (to_hang) {
    const std::string v = verdict_of("hang");
    if (v == "busy-wait-hang") {
      c.stance = "confirms";
      c.text =
          intro +
          "The TSDB confirms a collective busy-wait deadlock: GPUs at idle-level power with high "
          "utilisation during the hang window, and no network errors before it.";
    } else if (v == "network-triggered-hang") {
      c.stance = "confirms";
      c.text = intro + "The TSDB confirms the hang and finds its trigger: a network event on " +
               hosts_of("hang") +
               " just before training stopped, after which every rank busy-waited.";
    } else if (v == "node-death") {
      c.stance = "refines";
      c.text = intro + "The TSDB refines it: " + hosts_of("hang") +
               " died (stopped reporting), and the surviving ranks hung waiting for it. The root "
               "cause is the node, not "
               "the collective.";
    } else if (v == "straggler") {
      c.stance = "refines";
      c.text = intro + "The TSDB refines it: " + hosts_of("hang") +
               " kept computing while the others waited (a straggler).";
    } else if (v == "idle-hang") {
      c.stance = "refines";
      c.text = intro +
               "The TSDB refines it: the GPUs were idle, not spinning; the stall was outside the "
               "collectives.";
    } else if (v == "not-a-hang") {
      c.stance = "refutes";
      c.text =
          intro +
          "The TSDB refutes it: the GPUs drew active-level power throughout; training was running.";
    }
  } else if (to_heartbeat) {
    const std::string v = verdict_of("heartbeat");
    if (v.rfind("false-positive", 0) == 0) {
      c.stance = "confirms";
      c.text =
          intro + "The TSDB confirms the usual false positive (" + v +
          "): the accused tasks were training when the heartbeat mechanism declared them dead.";
    } else if (v == "true-positive") {
      c.stance = "refutes";
      c.text = intro + "Unlike the usual false positive, the TSDB shows " + hosts_of("heartbeat") +
               " really stopped before the timeout: a true positive; find what killed those tasks.";
    }
  } else if (to_oom && !to_hardware) {
    const std::string v = verdict_of("oom");
    if (v == "checkpoint-spike" || v == "memory-leak-ramp" || v == "single-spike" ||
        v == "all-hosts") {
      c.stance = "confirms";
      c.text = intro + "The TSDB confirms host memory ran out on " + hosts_of("oom") +
               " and shows how: " + v + ".";
    } else if (v == "no-host-memory-pressure") {
      c.stance = "refutes";
      c.text = intro +
               "The TSDB does not confirm a host-wide OOM: host memory never came near its limit "
               "(a cgroup limit "
               "or a different cause).";
    }
  } else if (to_hardware || to_network) {
    const std::string hw = verdict_of("hardware");
    const std::string net = verdict_of("network-health");
    const std::string oom = verdict_of("oom");
    if (hw == "hardware-fault" || hw == "driver-fault") {
      c.stance = to_network ? "refines" : "confirms";
      c.text = intro + "The TSDB finds a " + (hw == "hardware-fault" ? "hardware" : "GPU driver") +
               " fault on " + hosts_of("hardware") + " that explains it.";
    } else if (to_network &&
               (net == "rdma-link-failure" || net == "rdma-degraded" || net == "congestion")) {
      c.stance = "confirms";
      c.text = intro + "The TSDB confirms a network cause: " + net + " on " +
               hosts_of("network-health") + ".";
    } else if (to_oom && !oom.empty() && oom != "no-host-memory-pressure" &&
               oom != "inconclusive") {
      c.stance = "refines";
      c.text = intro + "The TSDB refines it: host memory ran out on " + hosts_of("oom") + " (" +
               oom + "), the most common silent killer.";
    } else if (to_network && (net == "healthy" || net == "tcp-only")) {
      c.stance = "refutes";
      c.text = intro +
               "The TSDB shows a clean RDMA network during the job: the timeout did not come from "
               "the links; "
               "look for a rank that stopped (OOM, crash) or a straggler.";
    } else if (!hw.empty()) {
      c.stance = "inconclusive";
      c.text =
          intro +
          "The TSDB shows no hardware fault on any node; the cause is more likely in software.";
    }
  }
  if (c.stance.empty()) {
    c.stance = "inconclusive";
    c.text = intro + "The metrics neither confirm nor refute it (see the playbooks' notes).";
  }
}

}  // namespace triage::tsdb
