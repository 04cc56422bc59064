#include "agent/health/preflight.h"

#include <algorithm>
#include <cctype>
#include <string_view>

namespace triage::agent {

namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += ", ";
    out += s;
  }
  return out;
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (const char c : s) {
    if (std::isdigit(static_cast<unsigned char>(c)) == 0) return false;
  }
  return true;
}

std::string describe(const LeftoverTask& t) {
  std::string line =
      "pid " + std::to_string(t.pid) + " (" + t.comm + ") of ended job " + std::to_string(t.job_id);
  if (!t.device.empty()) line += " holds " + t.device;
  if (t.stuck_in_d) {
    line += t.device.empty() ? " is stuck in D state" : " and is stuck in D state";
    if (!t.wchan.empty()) line += " (" + t.wchan + ")";
  }
  return line;
}

}  // namespace

PreflightAnswer decide_preflight(const PreflightFacts& facts) {
  PreflightAnswer a;
  if (facts.verdict.verdict == "drain-recommended") {
    std::vector<std::string> why;
    for (const auto& r : facts.verdict.reasons)
      why.push_back(r.reason);
    a.evidence.push_back("drain recommended: " + (why.empty() ? "(no reason given)" : joined(why)));
  }
  if (!facts.ports_down.empty()) a.evidence.push_back("port down: " + joined(facts.ports_down));
  for (const auto& t : facts.leftovers) {
    // A process of an ended job that neither holds a GPU nor is stuck costs the next job nothing.
    if (t.device.empty() && !t.stuck_in_d) continue;
    a.evidence.push_back(describe(t));
  }
  if (facts.gpus_present) {
    std::vector<std::string> missing;
    for (const auto& g : facts.gpus_expected) {
      if (facts.gpus_present->count(g) == 0) missing.push_back(g);
    }
    if (!missing.empty()) {
      a.evidence.push_back("GPU " + joined(missing) + " of the job's gres is not present");
    }
  }
  a.fit = a.evidence.empty();
  return a;
}

std::string preflight_reason(const PreflightAnswer& answer, size_t max_bytes) {
  std::string out = "triage preflight: ";
  for (size_t i = 0; i < answer.evidence.size(); ++i) {
    if (i > 0) out += "; ";
    out += answer.evidence[i];
  }
  // Slurm keeps a reason on one line: nothing the evidence quoted may break it.
  for (char& c : out) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  if (out.size() > max_bytes && max_bytes > 3) {
    out.resize(max_bytes - 3);
    out += "...";
  }
  return out;
}

std::vector<std::string> parse_job_gpus(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string_view item = std::string_view(text).substr(
        start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!all_digits(item)) return {};
    out.emplace_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::optional<std::string> gpu_index_of_device(const std::string& device_name) {
  const std::string_view name = device_name;
  constexpr std::string_view kNvidia = "/dev/nvidia";
  constexpr std::string_view kRender = "/dev/dri/renderD";
  if (name.substr(0, kNvidia.size()) == kNvidia) {
    const std::string_view n = name.substr(kNvidia.size());
    if (all_digits(n)) return std::string(n);
    return std::nullopt;
  }
  if (name.substr(0, kRender.size()) == kRender) {
    const std::string_view n = name.substr(kRender.size());
    if (!all_digits(n) || n.size() > 6) return std::nullopt;
    const long minor = std::stol(std::string(n));
    if (minor < 128) return std::nullopt;
    return std::to_string(minor - 128);
  }
  return std::nullopt;
}

std::vector<LeftoverTask> stuck_leftovers(const collector::DStateSample& sample,
                                          const JobTable& jobs) {
  std::vector<LeftoverTask> out;
  for (const auto& t : sample.tasks) {
    if (!t.persistent || !t.job_id) continue;
    const JobRecord* j = jobs.find(*t.job_id);
    if (j == nullptr || !j->ended) continue;
    LeftoverTask l;
    l.pid = t.pid;
    l.comm = t.comm;
    l.job_id = *t.job_id;
    l.stuck_in_d = true;
    l.wchan = t.wchan;
    out.push_back(std::move(l));
  }
  return out;
}

std::vector<LeftoverTask> gpu_leftovers(const collector::GpuHolderScan& scan, const JobTable& jobs,
                                        int64_t now_usec, int64_t grace_usec) {
  std::vector<LeftoverTask> out;
  for (const auto& h : scan.holders) {
    const JobRecord* j = jobs.find(h.job_id);
    if (j == nullptr || !j->ended || now_usec - j->end_usec < grace_usec) continue;
    LeftoverTask l;
    l.pid = h.pid;
    l.comm = h.comm;
    l.job_id = h.job_id;
    l.device = joined(h.devices);
    out.push_back(std::move(l));
  }
  return out;
}

std::vector<LeftoverTask> merge_leftovers(std::vector<LeftoverTask> stuck,
                                          const std::vector<LeftoverTask>& gpu) {
  for (const auto& g : gpu) {
    auto same = std::find_if(stuck.begin(), stuck.end(),
                             [&](const LeftoverTask& t) { return t.pid == g.pid; });
    if (same != stuck.end()) {
      same->device = g.device;
    } else {
      stuck.push_back(g);
    }
  }
  std::sort(stuck.begin(), stuck.end(),
            [](const LeftoverTask& a, const LeftoverTask& b) { return a.pid < b.pid; });
  return stuck;
}

}  // namespace triage::agent
