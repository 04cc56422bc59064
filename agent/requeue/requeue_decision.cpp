#include "agent/requeue/requeue_decision.h"

#include <algorithm>

#include "common/hostlist.h"

namespace triage::agent {

std::string_view to_string(RequeueOutcome o) {
  switch (o) {
    case RequeueOutcome::kNotAsked:
      return "not-asked";
    case RequeueOutcome::kDecline:
      return "declined";
    case RequeueOutcome::kRefuse:
      return "refused";
    case RequeueOutcome::kRequeue:
      return "requeued";
  }
  return "not-asked";
}

namespace {

bool user_side(std::string_view blame) {
  return blame == "user-code" || blame == "user-config" || blame == "input-data";
}

// The nodes a requeue keeps the next attempt off, and the words for why: trusted implications of
// a platform failure first, then the job's suspect nodes.
std::vector<std::string> nodes_to_exclude(const RequeueFacts& f, std::string& why) {
  std::vector<std::string> out;
  auto add = [&out](const std::string& n) {
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  };
  if (f.blame == "platform") {
    for (const ImplicatedNode& n : f.implicated) {
      if (n.trusted) add(n.node);
    }
    if (!out.empty()) why = "platform failure on " + compress_hostlist(out) + " (trusted evidence)";
  }
  if (f.blame == "platform" || f.blame == "unknown") {
    std::vector<std::string> suspects;
    for (const std::string& n : f.job_nodes) {
      if (f.suspects.count(n) != 0) suspects.push_back(n);
    }
    for (const std::string& n : suspects)
      add(n);
    if (!suspects.empty()) {
      why += (why.empty() ? "" : "; ") + f.blame + " failure on suspect node(s) " +
             compress_hostlist(suspects);
    }
  }
  return out;
}

std::string ask(const RequeueFacts& f) {
  return "--triage-requeue=" + std::to_string(f.asked_max);
}

RequeueDecision decline(std::string reason) {
  return {RequeueOutcome::kDecline, {}, std::move(reason)};
}

}  // namespace

RequeueDecision decide_requeue(const RequeueFacts& f) {
  if (f.asked_max <= 0) return {RequeueOutcome::kNotAsked, {}, "no --triage-requeue"};
  if (f.status != "failed" && f.status != "hanging") {
    return decline("not requeued: the job " + (f.status.empty() ? "ended" : f.status) +
                   ", it did not fail");
  }
  const std::string blame = f.blame.empty() ? "unknown" : f.blame;
  if (user_side(blame)) {
    return decline("not requeued: the failure" + (f.cls.empty() ? "" : " (" + f.cls + ")") +
                   " is blamed on " + blame + ", which another node would not change");
  }
  if (!f.crashloop.empty()) {
    RequeueDecision d = decline(f.crashloop);
    d.code = "crashloop";
    return d;
  }
  std::string why;
  const std::vector<std::string> exclude = nodes_to_exclude(f, why);
  if (exclude.empty()) {
    return decline("not requeued: blame " + blame +
                   " with no node implicated by trusted evidence and none of the job's nodes a "
                   "suspect, so there is no node to avoid");
  }
  if (f.restarts >= f.asked_max) {
    return decline("not requeued: " + why + ", but the job was already requeued " +
                   std::to_string(f.restarts) + " time(s) of the " + std::to_string(f.asked_max) +
                   " " + ask(f) + " allows");
  }
  RequeueDecision d{RequeueOutcome::kRefuse, exclude, "", ""};
  if (!f.admin_allows) {
    d.reason = why + "; " + ask(f) +
               " is not allowed on this cluster (plugstack requeue=allow is not set)";
    d.code = "not-allowed";
  } else if (!f.known) {
    d.reason = why + "; Slurm could not be asked about the job, so it is left as it is";
    d.code = "slurm-unknown";
  } else if (!f.attempt_changed.empty()) {
    d.reason = why + "; but " + f.attempt_changed + ", so it is left as it is";
    d.code = "attempt-changed";
  } else if (!f.unnamed.empty()) {
    d.reason = why + "; but " + f.unnamed + ", so it is left as it is";
    d.code = "job-unnamed";
  } else if (!f.batch || !f.requeueable) {
    d.reason = why + "; Slurm requeues only batch jobs that allow requeue (this one is " +
               (f.batch ? "not requeueable" : "not a batch job") + ")";
    d.code = "not-requeueable";
  } else {
    d.outcome = RequeueOutcome::kRequeue;
    d.code = why.rfind("platform failure", 0) == 0 ? "platform" : "suspect-node";
    d.reason = why + "; requeued (requeue " + std::to_string(f.restarts + 1) + " of " +
               std::to_string(f.asked_max) + ") excluding " + compress_hostlist(exclude);
  }
  return d;
}

}  // namespace triage::agent
