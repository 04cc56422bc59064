// Renders a node's kernel events for people and programs: the JSON object `slurm-triage kernel
// --format json` prints ({"events": [...], "verdict": {...}, ...}) and the Markdown node report of
// `--format md`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "collector/kernel_pipeline.h"
#include "common/model.h"

namespace triage::collector {

struct KernelReportInfo {
  std::string host;
  std::vector<std::string> sources;  // what was read ("text dmesg.txt", "journal /var/log/journal")
  KernelClassifierStats stats;
  std::optional<NodeVerdict> verdict;  // the node's health judged from these events
};

// Events in the order they were first seen (then by id).
void sort_events(std::vector<KernelEvent>& events);

nlohmann::json kernel_report_json(const std::vector<KernelEvent>& events,
                                  const KernelReportInfo& info);

// Markdown; everything that came from the kernel is escaped (common/text.h).
std::string kernel_report_markdown(const std::vector<KernelEvent>& events,
                                   const KernelReportInfo& info);

}  // namespace triage::collector
