#include "analyzer/node_evidence.h"

#include <algorithm>
#include <csignal>
#include <map>
#include <set>

#include "common/text.h"
#include "common/time_util.h"
#include "common/wait_status.h"

namespace triage {

namespace {

bool severity_at_least(Severity s, Severity min) {
  return static_cast<int>(s) >= static_cast<int>(min);
}

// A Slurm state the catalog gives to a cancellation class (CANCELLED, TIMEOUT, PREEMPTED, ...).
bool cancelled_state(const std::string& st, const SignatureCatalog& catalog) {
  const SignatureClass* c = st.empty() ? nullptr : catalog.slurm_state_class(st);
  return c != nullptr && c->cancellation;
}

std::string class_id_or_empty(const SignatureClass* c) {
  return c == nullptr ? std::string() : c->id;
}

// The line of a multi-line kernel record that names the event's process: for an OOM report that is
// the `oom-kill:...,pid=N` line with the job's cgroup, not the "invoked oom-killer" header (whose
// process is only the one that asked for memory). Records without a pid show their first line.
std::string event_line(const KernelEvent& e) {
  if (e.lines.empty()) return e.summary.empty() ? e.kind : e.summary;
  if (e.pid) {
    const std::string pid = std::to_string(*e.pid);
    for (const std::string& needle : {"pid=" + pid + ",", "pid=" + pid, "process " + pid + " "}) {
      for (const std::string& line : e.lines) {
        const size_t at = line.find(needle);
        if (at == std::string::npos) continue;
        const size_t end = at + needle.size();
        // "pid=12" must not match "pid=123".
        if (needle.back() == ',' || needle.back() == ' ' || end == line.size() || line[end] < '0' ||
            line[end] > '9')
          return line;
      }
    }
  }
  return e.lines.front();
}

std::string describe_event(const KernelEvent& e) {
  std::string s = e.kind;
  if (e.count > 1) s += " x" + std::to_string(e.count);
  if (e.time_usec > 0) s += " at " + format_utc(e.time_usec);
  if (!e.summary.empty()) s += ": " + e.summary;
  if (!e.task.empty() || e.pid) {
    s += " (";
    if (!e.task.empty()) s += e.task;
    if (e.pid) s += (e.task.empty() ? "pid " : ", pid ") + std::to_string(*e.pid);
    s += ")";
  }
  if (!e.device.empty()) s += " [" + e.device + "]";
  return s;
}

// How bad a task's end was, for picking the one to show per node: signals beat exit codes.
int task_badness(const TaskExit& t) {
  if (t.signal) return 3000 + *t.signal;
  if (t.exit_code && *t.exit_code != 0) return 1000 + *t.exit_code;
  if (t.exit_code) return 1;
  return 0;
}

std::string task_outcome(const TaskExit& t) {
  if (t.signal) return signal_name(*t.signal) + (t.core_dumped ? " (core dumped)" : "");
  if (t.exit_code) return "exit " + std::to_string(*t.exit_code);
  return "running";
}

std::string task_meaning(const TaskExit& t) {
  if (t.signal) return describe_exit_code(128 + *t.signal);
  if (t.exit_code) return describe_exit_code(*t.exit_code);
  return "";
}

}  // namespace

bool slurm_state_alive(const std::string& state) {
  return state == "RUNNING" || state == "CONFIGURING" || state == "SUSPENDED" ||
         state == "STOPPED" || state == "RESIZING" || state == "SIGNALING" || state == "REQUEUED";
}

bool all_nodes_exited_sigterm(const LogFacts& facts) {
  if (facts.node_exits.empty()) return false;
  return std::all_of(facts.node_exits.begin(), facts.node_exits.end(),
                     [](const NodeExitFact& n) { return n.exit_code == 143; });
}

std::vector<TrustedFinding> trusted_findings(const Evidence* evidence,
                                             const std::string& slurm_state,
                                             const SignatureCatalog& catalog) {
  std::vector<TrustedFinding> out;
  const bool cancelled = cancelled_state(slurm_state, catalog);
  if (evidence != nullptr) {
    for (const auto& node : evidence->nodes) {
      bool oom_decisive_here = false;
      for (const auto& e : node.events) {
        for (const auto& c : catalog.classes()) {
          if (std::find(c.kernel_events.begin(), c.kernel_events.end(), e.kind) ==
              c.kernel_events.end())
            continue;
          if (!severity_at_least(e.severity, c.kernel_min_severity)) continue;
          TrustedFinding tf;
          Finding& f = tf.finding;
          f.cls = c.id;
          f.source = "kernel:" + node.host;
          f.text = event_line(e);
          f.host = node.host;
          f.time_usec = e.time_usec;
          f.stage = c.stage;
          f.trusted = true;
          f.captures.emplace_back("kind", e.kind);
          if (!e.summary.empty()) f.captures.emplace_back("summary", e.summary);
          // The agent's port events name their port (a kernel link line's summary names its
          // interface).
          if (const auto p = e.fields.find("port"); p != e.fields.end())
            f.captures.emplace_back("port", p->second);
          if (e.pid) f.captures.emplace_back("pid", std::to_string(*e.pid));
          if (!e.task.empty()) f.captures.emplace_back("task", e.task);
          if (e.count > 1) f.captures.emplace_back("count", std::to_string(e.count));
          // Whether the OOM killer acted inside a memory limit or on the whole node decides blame.
          if (const auto k = e.fields.find("constraint"); k != e.fields.end())
            f.captures.emplace_back("constraint", k->second);
          if (e.kind == "oom-kill") {
            // The kernel killing some process of the job is not yet the job's failure: it is when a
            // rank died of SIGKILL on that node (or the victim was a rank).
            for (const auto& t : node.tasks) {
              const bool victim = e.pid && t.pid == *e.pid;
              if (victim || (t.signal && *t.signal == SIGKILL)) {
                tf.decisive = true;
                if (t.rank >= 0) f.rank = t.rank;
              }
            }
            oom_decisive_here = oom_decisive_here || tf.decisive;
          } else {
            tf.decisive = severity_at_least(e.severity, Severity::kError);
          }
          out.push_back(std::move(tf));
          break;  // one class per event
        }
      }
      for (const auto& t : node.tasks) {
        if (!t.signal && (!t.exit_code || *t.exit_code == 0)) continue;
        TrustedFinding tf;
        Finding& f = tf.finding;
        f.source = "tasks:" + node.host;
        f.host = node.host;
        f.rank = t.rank;
        f.trusted = true;
        f.time_usec = t.end_usec;
        const std::string who = "rank " + std::to_string(t.rank) + " (pid " +
                                std::to_string(t.pid) + ", step " +
                                (t.step.empty() ? "?" : t.step) + ") on " + node.host;
        if (t.signal) {
          const int sig = *t.signal;
          // Cancellation ends tasks with SIGTERM, then SIGKILL after KillWait: not a failure.
          if (sig == SIGTERM || sig == SIGINT ||
              (sig == SIGKILL && (cancelled || oom_decisive_here)))
            continue;
          f.cls = class_id_or_empty(catalog.task_end_class(TaskEnd::kSignal));
          f.text = who + " was killed by " + task_outcome(t);
          // Not decisive: a crash at teardown after an exception, or an abort after JAX's
          // coordinated shutdown, is a consequence; the ranking decides with the log.
          tf.decisive = false;
        } else {
          // The same at exit-code level: a cancellation's codes (the catalog's), or 128+SIGKILL.
          const SignatureClass* by_code = catalog.exit_code_class(*t.exit_code);
          if (cancelled &&
              ((by_code != nullptr && by_code->cancellation) || *t.exit_code == 128 + SIGKILL))
            continue;
          f.cls = class_id_or_empty(catalog.task_end_class(TaskEnd::kNonzeroExit));
          f.text = who + " exited with code " + std::to_string(*t.exit_code);
        }
        const SignatureClass* c = catalog.find(f.cls);
        if (c == nullptr) continue;
        f.stage = c->stage;
        out.push_back(std::move(tf));
      }
    }
  }
  if (!slurm_state.empty()) {
    for (const auto& c : catalog.classes()) {
      if (std::find(c.slurm_states.begin(), c.slurm_states.end(), slurm_state) ==
          c.slurm_states.end())
        continue;
      TrustedFinding tf;
      tf.finding.cls = c.id;
      tf.finding.source = "slurm";
      tf.finding.text = "Slurm job state: " + slurm_state;
      tf.finding.stage = c.stage;
      tf.finding.trusted = true;
      if (evidence != nullptr && evidence->job.end_time > 0)
        tf.finding.time_usec = evidence->job.end_time * 1000000;
      // Slurm's end state is ranked with the log: a hang before a time limit is still the cause.
      tf.decisive = false;
      out.push_back(std::move(tf));
      break;
    }
  }
  return out;
}

std::vector<NodeRow> build_node_table(const Evidence* evidence, const LogFacts* facts) {
  std::vector<NodeRow> rows;
  std::map<std::string, size_t> index;
  auto row_for = [&](const std::string& host) -> NodeRow& {
    auto it = index.find(host);
    if (it != index.end()) return rows[it->second];
    index.emplace(host, rows.size());
    rows.push_back(NodeRow{});
    rows.back().host = host;
    return rows.back();
  };
  if (evidence != nullptr) {
    for (const auto& node : evidence->nodes) {
      NodeRow& r = row_for(node.host);
      r.from_agent = true;
      r.reachable = node.reachable;
      r.unreachable_reason = node.error;
      const TaskExit* worst = nullptr;
      for (const auto& t : node.tasks) {
        const int64_t id = t.rank >= 0 ? t.rank : t.task;
        if (id >= 0 && std::find(r.ranks.begin(), r.ranks.end(), id) == r.ranks.end())
          r.ranks.push_back(id);
        if (worst == nullptr || task_badness(t) > task_badness(*worst)) worst = &t;
      }
      if (worst != nullptr) {
        r.exit = task_outcome(*worst);
        r.meaning = task_meaning(*worst);
      }
      for (const auto& e : node.events)
        r.events.push_back(describe_event(e));
      if (node.verdict) {
        r.verdict = node.verdict->verdict;
        for (const auto& reason : node.verdict->reasons) {
          r.verdict_reasons.push_back(reason.reason +
                                      (reason.action.empty() ? "" : " (" + reason.action + ")"));
        }
      } else {
        r.verdict = node.reachable ? "" : "unknown";
      }
    }
    // Nodes Slurm allocated but no agent evidence covers.
    for (const auto& host : evidence->job.nodes) {
      if (index.count(host) == 0) {
        NodeRow& r = row_for(host);
        r.verdict = "unknown";
        r.reachable = false;
        r.unreachable_reason = "no evidence from this node's agent";
      }
    }
  }
  if (facts != nullptr) {
    const bool clean_cancel = all_nodes_exited_sigterm(*facts);
    for (const auto& ne : facts->node_exits) {
      NodeRow& r = row_for(ne.host);
      r.from_log = true;
      const std::string hint = "NODE_EXIT exit=" + std::to_string(ne.exit_code) + " (line " +
                               std::to_string(ne.line) + ")";
      r.log_hint = r.log_hint.empty() ? hint : r.log_hint + "; " + hint;
      if (r.exit.empty()) {
        r.exit = "exit " + std::to_string(ne.exit_code);
        r.meaning = clean_cancel ? "SIGTERM on every node: a clean cancellation"
                                 : describe_exit_code(ne.exit_code);
      }
    }
    for (const auto& st : facts->srun_tasks) {
      NodeRow& r = row_for(st.host);
      r.from_log = true;
      for (const int64_t rank : st.ranks) {
        if (std::find(r.ranks.begin(), r.ranks.end(), rank) == r.ranks.end())
          r.ranks.push_back(rank);
      }
      const std::string hint = "srun: task" + std::string(st.ranks.size() == 1 ? " " : "s ") +
                               st.tasks + ": " + st.outcome + " (line " + std::to_string(st.line) +
                               ")";
      if (r.log_hint.size() < 1024)
        r.log_hint = r.log_hint.empty() ? hint : r.log_hint + "; " + hint;
    }
  }
  for (auto& r : rows)
    std::sort(r.ranks.begin(), r.ranks.end());
  return rows;
}

HangOriginInput hang_origin_evidence(const Evidence* evidence, const std::vector<NodeRow>& nodes) {
  HangOriginInput in;
  for (const auto& r : nodes) {
    for (const int64_t rank : r.ranks)
      in.rank_node.emplace(rank, r.host);
  }
  if (evidence == nullptr) return in;
  // The ranks are the tasks of the job's training step: the latest numbered step (the batch and
  // extern steps number their tasks from 0 too).
  int64_t step = -1;
  for (const auto& node : evidence->nodes) {
    for (const auto& t : node.tasks) {
      if (const auto n = parse_int(t.step)) step = std::max(step, *n);
    }
  }
  std::set<int64_t> ranks;
  for (const auto& node : evidence->nodes) {
    for (const auto& t : node.tasks) {
      const auto n = parse_int(t.step);
      if (!n || *n != step || t.rank < 0) continue;
      ranks.insert(t.rank);
      in.rank_node[t.rank] = t.host.empty() ? node.host : t.host;
      if (t.end_usec > 0 && t.wait_status)
        in.task_ends.push_back(RankEnd{t.rank, node.host, t.end_usec, task_outcome(t)});
    }
    NodeStallSignals sig;
    sig.host = node.host;
    sig.job_dstate = node.job_dstate;
    for (const auto& e : node.events) {
      if (severity_at_least(e.severity, Severity::kWarning))
        sig.events.emplace_back(e.time_usec, describe_event(e));
    }
    if (sig.job_dstate > 0 || !sig.events.empty()) in.nodes.push_back(std::move(sig));
  }
  in.known_ranks.assign(ranks.begin(), ranks.end());
  return in;
}

}  // namespace triage
