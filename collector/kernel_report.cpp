#include "collector/kernel_report.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "common/text.h"
#include "common/time_util.h"

namespace triage::collector {

namespace {

int64_t monotonic_of(const KernelEvent& e) {
  const auto it = e.fields.find("monotonic_usec");
  if (it == e.fields.end()) return -1;
  return parse_int(it->second).value_or(-1);
}

std::string when(const KernelEvent& e) {
  if (e.time_usec > 0) return format_utc(e.time_usec);
  const int64_t mono = monotonic_of(e);
  if (mono >= 0) {
    char buf[64];
    (void)std::snprintf(buf, sizeof buf, "%lld.%06llds after boot",
                        static_cast<long long>(mono / 1000000),
                        static_cast<long long>(mono % 1000000));
    return buf;
  }
  return "unknown time";
}

std::string with_thousands(uint64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

// The verdict, its reasons and which events (by their number in the table below) back each one.
std::string verdict_markdown(const NodeVerdict& v, const std::vector<KernelEvent>& events) {
  std::string md = "\n## Node verdict: " + md_inline(v.verdict) + "\n\n";
  if (v.reasons.empty()) {
    md += "No evidence against this node's hardware or driver state.\n";
    return md;
  }
  for (const VerdictReason& r : v.reasons) {
    md += "- " + md_inline(r.reason) + " (action: " + md_inline(r.action) + ")";
    std::string refs;
    for (const std::string& id : r.event_ids) {
      for (size_t i = 0; i < events.size(); ++i) {
        if (events[i].id != id) continue;
        refs += (refs.empty() ? "" : ", ") + std::string("#") + std::to_string(i + 1);
        break;
      }
    }
    if (!refs.empty()) md += "; events " + refs;
    md += "\n";
  }
  return md;
}

}  // namespace

void sort_events(std::vector<KernelEvent>& events) {
  std::stable_sort(events.begin(), events.end(), [](const KernelEvent& a, const KernelEvent& b) {
    if (a.time_usec != b.time_usec && a.time_usec > 0 && b.time_usec > 0) {
      return a.time_usec < b.time_usec;
    }
    const int64_t ma = monotonic_of(a);
    const int64_t mb = monotonic_of(b);
    if (a.boot_id == b.boot_id && ma >= 0 && mb >= 0 && ma != mb) return ma < mb;
    return false;
  });
}

nlohmann::json kernel_report_json(const std::vector<KernelEvent>& events,
                                  const KernelReportInfo& info) {
  nlohmann::json j = nlohmann::json::object();
  j["events"] = nlohmann::json::array();
  for (const auto& e : events)
    j["events"].push_back(e);
  if (!info.host.empty()) j["host"] = info.host;
  j["sources"] = info.sources;
  j["records"] = info.stats.records;
  j["harmless"] = info.stats.harmless;
  j["lost_records"] = info.stats.lost;
  if (info.verdict) j["verdict"] = *info.verdict;
  return j;
}

std::string kernel_report_markdown(const std::vector<KernelEvent>& events,
                                   const KernelReportInfo& info) {
  std::string md = "# Kernel events";
  if (!info.host.empty()) md += ": " + md_inline(info.host);
  md += "\n\n";

  std::map<Severity, size_t> by_severity;
  for (const auto& e : events)
    ++by_severity[e.severity];
  md += "Read " + with_thousands(info.stats.records) + " kernel lines";
  if (!info.sources.empty()) {
    md += " from ";
    for (size_t i = 0; i < info.sources.size(); ++i) {
      if (i > 0) md += ", ";
      md += md_code_span(info.sources[i]);
    }
  }
  md += ": " + std::to_string(events.size()) + (events.size() == 1 ? " event" : " events");
  if (!events.empty()) {
    md += " (";
    bool first = true;
    for (auto it = by_severity.rbegin(); it != by_severity.rend(); ++it) {
      if (!first) md += ", ";
      md += std::to_string(it->second) + " " + std::string(to_string(it->first));
      first = false;
    }
    md += ")";
  }
  md += ".";
  if (info.stats.harmless > 0) {
    md += " " + with_thousands(info.stats.harmless) + " known-harmless lines were set aside.";
  }
  if (info.stats.lost > 0) {
    md += " **" + with_thousands(info.stats.lost) + " kernel records were lost** while reading.";
  }
  md += "\n";
  if (info.verdict) md += verdict_markdown(*info.verdict, events);
  if (events.empty()) {
    md += "\nNothing in this kernel log points at a problem.\n";
    return md;
  }

  md += "\n| # | first seen | kind | severity | device | count | action | summary |\n";
  md += "|---|---|---|---|---|---|---|---|\n";
  for (size_t i = 0; i < events.size(); ++i) {
    const KernelEvent& e = events[i];
    md += "| " + std::to_string(i + 1) + " | " + md_table_cell(when(e)) + " | " +
          md_table_cell(e.kind) + " | " + std::string(to_string(e.severity)) + " | " +
          md_table_cell(e.device) + " | " + std::to_string(e.count) + " | " +
          md_table_cell(e.action) + " | " + md_table_cell(e.summary) + " |\n";
  }

  for (size_t i = 0; i < events.size(); ++i) {
    const KernelEvent& e = events[i];
    md += "\n## " + std::to_string(i + 1) + ". " + md_inline(e.kind) + " (" +
          std::string(to_string(e.severity)) + ")\n\n";
    md += md_inline(e.summary) + "\n\n";
    std::vector<std::string> facts;
    if (!e.device.empty()) facts.push_back("device " + md_code_span(e.device));
    if (e.pid) {
      std::string p = "pid " + std::to_string(*e.pid);
      if (!e.task.empty()) p += " (" + md_code_span(e.task) + ")";
      facts.push_back(p);
    } else if (!e.task.empty()) {
      facts.push_back("task " + md_code_span(e.task));
    }
    if (e.uid) facts.push_back("uid " + std::to_string(*e.uid));
    if (e.job_id) {
      std::string j = "job " + std::to_string(*e.job_id);
      if (!e.step.empty()) j += " step " + md_inline(e.step);
      facts.push_back(j);
    }
    if (!e.cgroup.empty()) facts.push_back("cgroup " + md_code_span(e.cgroup));
    if (e.code) facts.push_back("code " + std::to_string(*e.code));
    if (!e.block.empty()) facts.push_back("block " + md_code_span(e.block));
    if (!facts.empty()) {
      md += "- ";
      for (size_t f = 0; f < facts.size(); ++f)
        md += (f ? "; " : "") + facts[f];
      md += "\n";
    }
    md += "- first seen " + md_inline(when(e));
    if (e.count > 1) {
      md += ", " + with_thousands(e.count) + " times";
      if (e.last_usec > 0) md += ", last " + md_inline(format_utc(e.last_usec));
    }
    md += "\n";
    if (!e.action.empty()) md += "- recommended action: " + md_inline(e.action) + "\n";
    if (!e.cause.empty()) md += "- caused by event " + md_code_span(e.cause) + "\n";
    if (const auto it = e.fields.find("meaning"); it != e.fields.end()) {
      md += "- meaning: " + md_inline(it->second) + "\n";
    }
    md += "- rule " + md_code_span(e.rule) + ", event id " + md_code_span(e.id) + "\n\n";
    md += md_code_block(e.lines);
  }
  return md;
}

}  // namespace triage::collector
