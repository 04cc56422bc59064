#include "collector/kernel_rules.h"

#include <algorithm>
#include <array>

#include "common/text.h"

namespace triage::collector {

namespace {

constexpr std::array<std::string_view, 21> kKinds = {"oom-kill",
                                                     "gpu-ras-uncorrectable",
                                                     "gpu-ras-correctable",
                                                     "gpu-hardware-error",
                                                     "gpu-ring-timeout",
                                                     "gpu-reset",
                                                     "gpu-page-fault",
                                                     "gpu-init-failure",
                                                     "gpu-driver-oops",
                                                     "nvidia-xid",
                                                     "gpu-fallen-off-bus",
                                                     "hung-task",
                                                     "soft-lockup",
                                                     "rcu-stall",
                                                     "mce",
                                                     "pcie-aer",
                                                     "nfs-timeout",
                                                     "lustre-error",
                                                     "link-down",
                                                     "nic-init-failure",
                                                     "kernel-oops"};

constexpr std::array<std::string_view, 5> kActions = {"none", "investigate", "reset-gpu", "drain",
                                                      "reboot-at-job-boundary"};

}  // namespace

bool is_kernel_event_kind(std::string_view kind) {
  for (const auto k : kKinds) {
    if (k == kind) return true;
  }
  return false;
}

std::vector<std::string_view> kernel_event_kinds() {
  return {kKinds.begin(), kKinds.end()};
}

bool is_event_action(std::string_view action) {
  for (const auto a : kActions) {
    if (a == action) return true;
  }
  return false;
}

bool is_event_remedy(std::string_view remedy) {
  return remedy == "reboot" || remedy == "none";
}

void KernelRules::match(std::string_view message, LineMatch& m) const {
  m.harmless = false;
  m.rules.clear();
  thread_local std::vector<int> hits;
  hits.clear();
  RE2::Set::ErrorInfo info{};
  const re2::StringPiece text(message.data(), message.size());
  const bool any = set_->Match(text, &hits, &info);
  if (!any && info.kind != RE2::Set::kNoError) {
    // The combined automaton ran out of memory on this line: ask every pattern on its own.
    for (const auto& h : harmless_) {
      if (RE2::PartialMatch(text, *h.re)) m.harmless = true;
    }
    for (size_t i = 0; i < rules_.size(); ++i) {
      if (!rules_[i].is_refiner() &&
          opens(i, message, [](const std::string&, std::string_view) {})) {
        m.rules.push_back(i);
      }
    }
    return;
  }
  for (const int h : hits) {
    const int owner = set_owner_[static_cast<size_t>(h)];
    if (owner < 0) {
      m.harmless = true;
      continue;
    }
    const auto idx = static_cast<size_t>(owner);
    bool seen = false;
    for (const size_t r : m.rules)
      seen |= r == idx;
    if (seen) continue;
    bool vetoed = false;
    for (const auto& u : rules_[idx].unless)
      vetoed |= RE2::PartialMatch(text, *u.re);
    if (!vetoed) m.rules.push_back(idx);
  }
  // Load order decides which rule a line belongs to when several match.
  std::sort(m.rules.begin(), m.rules.end());
}

bool KernelRules::harmless_matches(const KernelHarmless& h, std::string_view message) const {
  const re2::StringPiece text(message.data(), message.size());
  for (size_t i = h.first_pattern; i < h.first_pattern + h.patterns && i < harmless_.size(); ++i) {
    if (RE2::PartialMatch(text, *harmless_[i].re)) return true;
  }
  return false;
}

const XidInfo& KernelRules::xid(int64_t code, bool& known) const {
  const auto it = xid_.find(code);
  known = it != xid_.end();
  return known ? it->second : xid_default_;
}

const RasBlockInfo& KernelRules::ras(std::string_view block, bool& known) const {
  const auto it = ras_.find(block);
  known = it != ras_.end();
  return known ? it->second : ras_default_;
}

bool KernelRules::job_from_cgroup(std::string_view cgroup, uint64_t& job_id,
                                  std::string& step) const {
  for (const auto& p : cgroup_job_) {
    std::string job;
    std::string s;
    const bool hit = match_pattern(p, cgroup, [&](const std::string& name, std::string_view v) {
      if (name == "job_id") job = std::string(v);
      if (name == "step") s = std::string(v);
    });
    if (!hit) continue;
    const auto id = parse_uint(job);
    if (!id) continue;
    job_id = *id;
    step = s;
    return true;
  }
  return false;
}

std::vector<std::string> KernelRules::opener_patterns() const {
  std::vector<std::string> out;
  for (const auto& r : rules_) {
    for (const auto& p : r.patterns)
      out.push_back(p.re->pattern());
  }
  for (const auto& h : harmless_)
    out.push_back(h.re->pattern());
  return out;
}

}  // namespace triage::collector
