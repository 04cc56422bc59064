// The playbook table and the choice of playbooks for a request.
#include "analyzer/tsdb/playbook_table.h"

#include <algorithm>
#include <cmath>

#include "analyzer/tsdb/playbook_context.h"
#include "common/rules_file.h"
#include "common/text.h"

namespace triage::tsdb {

const std::vector<PlaybookEntry>& playbook_table() {
  static const std::vector<PlaybookEntry> table = {
      {"hang", 1, "Hang: GPU utilisation vs. power in the hang window", false,
       [](Context& ctx, std::vector<HardwareVerdict>&) { return run_hang(ctx); }},
      {"heartbeat", 2, "Heartbeat timeout: were the accused tasks alive?", false,
       [](Context& ctx, std::vector<HardwareVerdict>&) { return run_heartbeat(ctx); }},
      {"oom", 3, "Host OOM: memory trajectory", false,
       [](Context& ctx, std::vector<HardwareVerdict>&) { return run_oom(ctx); }},
      {"hardware", 4, "Node and hardware faults", false,
       [](Context& ctx, std::vector<HardwareVerdict>& v) { return run_hardware(ctx, v); }},
      {"gpu-health", 5, "GPU health summary", true,
       [](Context& ctx, std::vector<HardwareVerdict>&) { return run_gpu_health(ctx); }},
      {"network-health", 6, "Network health and node-exclusion priority", true,
       [](Context& ctx, std::vector<HardwareVerdict>& v) { return run_network(ctx, v); }},
      {"training-stability", 7, "Training stability (real tb_* samples only)", true,
       [](Context& ctx, std::vector<HardwareVerdict>&) { return run_training(ctx); }},
  };
  return table;
}

std::vector<std::string> known_playbook_ids() {
  std::vector<std::string> out;
  for (const auto& e : playbook_table())
    out.emplace_back(e.id);
  return out;
}

const PlaybookEntry* find_playbook_entry(std::string_view id) {
  for (const auto& e : playbook_table()) {
    if (id == e.id) return &e;
  }
  return nullptr;
}

const PlaybookEntry* find_playbook_entry(int number) {
  for (const auto& e : playbook_table()) {
    if (e.number == number) return &e;
  }
  return nullptr;
}

PlaybookResult new_playbook(std::string_view id) {
  const PlaybookEntry* e = find_playbook_entry(id);
  if (e == nullptr) throw std::logic_error("no playbook '" + std::string(id) + "' in the table");
  PlaybookResult r;
  r.number = e->number;
  r.id = e->id;
  r.title = e->title;
  return r;
}

void PlaybookResult::add_finding(Severity severity, std::string text,
                                 std::vector<std::string> named_hosts, std::optional<double> time) {
  Finding& f = findings.emplace_back();
  f.source = "metrics:" + id;
  f.severity = severity;
  f.text = std::move(text);
  if (named_hosts.size() == 1) f.host = named_hosts.front();
  f.hosts = std::move(named_hosts);
  if (time && std::isfinite(*time)) f.time_usec = std::llround(*time * 1e6);
}

std::vector<int> playbooks_for(const std::vector<std::string>& class_playbooks, bool full,
                               std::vector<std::string>* unknown) {
  std::vector<int> out;
  for (const auto& id : class_playbooks) {
    if (const PlaybookEntry* e = find_playbook_entry(id)) {
      out.push_back(e->number);
    } else if (unknown != nullptr) {
      unknown->push_back(id);
    }
  }
  if (full || out.empty()) {
    for (const auto& e : playbook_table()) {
      if (e.in_full_mode) out.push_back(e.number);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool hands_off_to(const TsdbRequest& req, std::string_view playbook_id) {
  return std::find(req.class_playbooks.begin(), req.class_playbooks.end(), playbook_id) !=
         req.class_playbooks.end();
}

std::string analysis_label(const std::vector<std::string>& class_playbooks) {
  return class_playbooks.empty() ? "health-check" : join(class_playbooks, " + ");
}

std::vector<std::string> catalog_class_playbooks(const std::vector<std::string>& layers,
                                                 const std::string& triage_class) {
  std::vector<std::string> out;
  if (triage_class.empty()) return out;
  const RulesLoad load = load_rule_layers(layers);
  for (const auto& s : load.sections) {
    if (s.type != "signature" || s.id != triage_class) continue;
    // The analyzer's catalog (analyzer/signature_catalog.h) reads the same key: one id a line.
    for (const auto* e : s.all("playbook")) {
      if (!trim(e->value).empty()) out.emplace_back(trim(e->value));
    }
  }
  return out;
}

}  // namespace triage::tsdb
