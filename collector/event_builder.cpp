#include "collector/event_builder.h"

#include <algorithm>

#include "collector/kernel_message.h"
#include "common/text.h"

namespace triage::collector {

namespace {

constexpr size_t kMaxLineBytes = 4096;
constexpr size_t kMaxSummaryBytes = 300;

// printable() for display, with a shortcut for the usual plain-ASCII kernel line.
std::string display(std::string_view s, size_t max_bytes) {
  s = truncate_utf8(s, max_bytes);
  const bool plain = std::all_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u >= 0x20 && u < 0x7f) || u == '\t';
  });
  return plain ? std::string(s) : printable(s);
}

std::string_view ras_type_name(CatalogRef c) {
  switch (c) {
    case CatalogRef::kRasUe:
      return "ue";
    case CatalogRef::kRasCe:
      return "ce";
    case CatalogRef::kRasDe:
      return "de";
    default:
      return "";
  }
}

}  // namespace

void EventBuilder::apply_capture(KernelEvent& e, const std::string& name,
                                 const std::string& value) const {
  if (name == "device") {
    if (e.device.empty()) e.device = canonical_device(value);
  } else if (name == "pid") {
    if (!e.pid) e.pid = parse_int(value);
  } else if (name == "uid") {
    if (!e.uid) e.uid = parse_int(value);
  } else if (name == "code") {
    if (!e.code) e.code = parse_int(value);
  } else if (name == "task") {
    if (e.task.empty()) e.task = display(value, 256);
  } else if (name == "block") {
    if (e.block.empty()) e.block = to_lower(value);
  } else if (name == "cgroup") {
    if (e.cgroup.empty()) e.cgroup = display(value, 1024);
  } else if (!value.empty()) {
    e.fields.try_emplace(name, display(value, 1024));
  }
}

void EventBuilder::apply_catalog(KernelEvent& e, const KernelRule& rule) const {
  bool known = false;
  if (rule.catalog == CatalogRef::kXid && e.code) {
    const XidInfo& x = rules_.xid(*e.code, known);
    e.severity = x.severity;
    e.action = x.action;
    if (!x.meaning.empty()) e.fields["meaning"] = x.meaning;
    if (!x.fault.empty()) e.fields["fault"] = x.fault;
    if (!known) e.fields["catalog"] = "unknown code";
    return;
  }
  int t = -1;
  if (rule.catalog == CatalogRef::kRasUe) t = 0;
  if (rule.catalog == CatalogRef::kRasCe) t = 1;
  if (rule.catalog == CatalogRef::kRasDe) t = 2;
  if (t < 0 || e.block.empty()) return;
  const RasBlockInfo& b = rules_.ras(e.block, known);
  e.severity = b.severity[t];
  e.action = b.action[t];
  e.fields["ras_type"] = std::string(ras_type_name(rule.catalog));
  if (!b.meaning.empty()) e.fields["meaning"] = b.meaning;
  if (!b.metric.empty()) e.fields["metric"] = b.metric;
  if (!known) e.fields["catalog"] = "unknown block";
}

void EventBuilder::apply_job(KernelEvent& e) const {
  // The task's own cgroup says the most (it names the step); the OOM domain or cpuset still
  // names the job when that is all the kernel printed.
  for (const char* alt : {"oom_memcg", "cpuset"}) {
    if (!e.cgroup.empty()) break;
    const auto it = e.fields.find(alt);
    if (it != e.fields.end() && it->second != "/" && it->second != "(null)") e.cgroup = it->second;
  }
  if (e.cgroup.empty()) return;
  uint64_t job = 0;
  std::string step;
  if (rules_.job_from_cgroup(e.cgroup, job, step)) {
    e.job_id = job;
    e.step = step;
  }
}

std::string EventBuilder::render_summary(const std::string& tmpl, const KernelEvent& e) const {
  std::string out;
  for (size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] != '{') {
      out.push_back(tmpl[i]);
      continue;
    }
    const size_t close = tmpl.find('}', i);
    if (close == std::string::npos) {
      out.append(tmpl, i, std::string::npos);
      break;
    }
    const std::string name = tmpl.substr(i + 1, close - i - 1);
    std::string v;
    if (name == "device") v = e.device;
    else if (name == "task") v = e.task;
    else if (name == "block") v = e.block;
    else if (name == "cgroup") v = e.cgroup;
    else if (name == "step") v = e.step;
    else if (name == "pid" && e.pid) v = std::to_string(*e.pid);
    else if (name == "uid" && e.uid) v = std::to_string(*e.uid);
    else if (name == "code" && e.code) v = std::to_string(*e.code);
    else if (name == "job_id" && e.job_id) v = std::to_string(*e.job_id);
    else if (const auto it = e.fields.find(name); it != e.fields.end()) v = it->second;
    out += v.empty() ? "?" : v;
    i = close;
  }
  return out;
}

std::vector<size_t> EventBuilder::refiners_that_apply(const OpenRecord& r) const {
  const KernelRule& rule = rules_.rules()[r.rule];
  std::vector<size_t> out;
  for (size_t i = 0; i < rule.refined_by.size() && i < r.refine_hits.size(); ++i) {
    const auto& hits = r.refine_hits[i];
    if (!hits.empty() && std::find(hits.begin(), hits.end(), false) == hits.end()) out.push_back(i);
  }
  return out;
}

KernelEvent EventBuilder::build(const OpenRecord& r) const {
  const KernelRule& rule = rules_.rules()[r.rule];
  KernelEvent e;
  e.id = r.id;
  e.kind = rule.kind;
  e.severity = rule.severity;
  e.action = rule.action;
  e.rule = rule.id;
  e.host = r.host.empty() ? host_ : r.host;
  e.boot_id = r.boot_id;
  e.time_usec = r.first_realtime;
  e.last_usec = r.last_realtime;
  e.count = 1;
  for (const auto& [name, value] : r.captures) apply_capture(e, name, value);
  apply_catalog(e, rule);

  for (const size_t i : refiners_that_apply(r)) {
    const KernelRule& ref = rules_.rules()[rule.refined_by[i]];
    if (ref.sets_kind && ref.kind != e.kind) {
      e.fields.try_emplace("opened_as", e.kind);
      e.kind = ref.kind;
    }
    if (ref.sets_severity) e.severity = ref.severity;
    if (ref.sets_action) e.action = ref.action;
    for (const auto& [name, value] : r.refine_captures[i]) apply_capture(e, name, value);
    auto& by = e.fields["refined_by"];
    by += by.empty() ? ref.id : "," + ref.id;
  }

  if (e.device.empty()) e.device = canonical_device(r.device);
  if (e.device.empty() && r.kernel_device.rfind("+pci:", 0) == 0) {
    e.device = canonical_device(r.kernel_device.substr(5));
  }
  apply_job(e);
  if (r.first_monotonic >= 0) e.fields["monotonic_usec"] = std::to_string(r.first_monotonic);
  if (r.line_count > r.lines.size()) e.fields["lines_total"] = std::to_string(r.line_count);
  return e;
}

void EventBuilder::complete(KernelEvent& e, const OpenRecord& r) const {
  const KernelRule& rule = rules_.rules()[r.rule];
  const std::string* summary_tmpl = &rule.summary;
  for (const size_t i : refiners_that_apply(r)) {
    const KernelRule& ref = rules_.rules()[rule.refined_by[i]];
    if (ref.sets_summary) summary_tmpl = &ref.summary;
  }
  append_lines(e, r);
  if (!summary_tmpl->empty()) {
    e.summary = display(render_summary(*summary_tmpl, e), kMaxSummaryBytes);
  } else {
    e.summary = display(r.first_message, kMaxSummaryBytes);
  }
}

void EventBuilder::append_lines(KernelEvent& into, const OpenRecord& r) {
  for (const auto& l : r.lines) {
    if (into.lines.size() >= KernelEvent::kMaxEventLines) break;
    into.lines.push_back(display(l, kMaxLineBytes));
  }
}

}  // namespace triage::collector
