#include "collector/event_builder.h"

#include <algorithm>
#include <array>

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

int ras_index(CatalogRef c) {
  switch (c) {
    case CatalogRef::kRasUe:
      return 0;
    case CatalogRef::kRasCe:
      return 1;
    case CatalogRef::kRasDe:
      return 2;
    default:
      return -1;
  }
}

constexpr std::array<const char*, 3> kRasTypes = {"ue", "ce", "de"};

}  // namespace

// A named capture of the record: its own lines first, then those of the refining rules that
// apply (when `identity` says which).
const std::string* EventBuilder::capture(const OpenRecord& r, const EventIdentity* identity,
                                         const char* name) const {
  if (const std::string* v = r.captures.find(name)) return v;
  if (identity == nullptr) return nullptr;
  for (const size_t i : identity->refiners) {
    if (const std::string* v = r.refine_captures[i].find(name)) return v;
  }
  return nullptr;
}

EventIdentity EventBuilder::identify(const OpenRecord& r) const {
  const KernelRule& rule = rules_.rules()[r.rule];
  EventIdentity id;
  for (size_t i = 0; i < rule.refined_by.size() && i < r.refine_hits.size(); ++i) {
    const auto& hits = r.refine_hits[i];
    if (!hits.empty() && std::find(hits.begin(), hits.end(), false) == hits.end()) {
      id.refiners.push_back(i);
    }
  }
  id.kind = &rule.kind;
  id.severity = rule.severity;
  id.action = &rule.action;
  id.remedy = &rule.remedy;
  if (const auto* d = capture(r, &id, "device")) id.device = canonical_device(*d);
  if (id.device.empty()) id.device = r.device;
  if (id.device.empty() && r.kernel_device.rfind("+pci:", 0) == 0) {
    id.device = canonical_device(std::string_view(r.kernel_device).substr(5));
  }
  if (const auto* c = capture(r, &id, "code")) id.code = parse_int(*c);
  if (const auto* b = capture(r, &id, "block")) id.block = to_lower(*b);

  bool known = false;
  if (rule.catalog == CatalogRef::kXid && id.code) {
    const XidInfo& x = rules_.xid(*id.code, known);
    id.severity = x.severity;
    id.action = &x.action;
    if (!x.remedy.empty()) id.remedy = &x.remedy;
  }
  if (const int t = ras_index(rule.catalog); t >= 0 && !id.block.empty()) {
    const RasBlockInfo& b = rules_.ras(id.block, known);
    id.severity = b.severity[static_cast<size_t>(t)];
    id.action = &b.action[static_cast<size_t>(t)];
  }
  for (const size_t i : id.refiners) {
    const KernelRule& ref = rules_.rules()[rule.refined_by[i]];
    if (ref.sets_kind) id.kind = &ref.kind;
    if (ref.sets_severity) id.severity = ref.severity;
    if (ref.sets_action) id.action = &ref.action;
    if (ref.sets_remedy) id.remedy = &ref.remedy;
  }
  return id;
}

std::string EventBuilder::flood_key(const OpenRecord& r, const EventIdentity& id) const {
  std::string k;
  k.reserve(r.first_message.size() + 128);
  const char sep = '\x1f';
  k.append(rules_.rules()[r.rule].id).push_back(sep);
  k.append(*id.kind).push_back(sep);
  k.append(to_string(id.severity)).push_back(sep);
  k.append(*id.action).push_back(sep);
  k.append(id.device).push_back(sep);
  k.append(id.block).push_back(sep);
  k.append(id.code ? std::to_string(*id.code) : "").push_back(sep);
  k.append(r.boot_id).push_back(sep);
  append_flood_shape(k, r.first_message);
  return k;
}

void EventBuilder::apply_capture(KernelEvent& e, const std::string& name,
                                 const std::string& value) const {
  if (name == "device" || name == "code" || name == "block") return;  // part of the identity
  if (name == "pid") {
    if (!e.pid) e.pid = parse_int(value);
  } else if (name == "uid") {
    if (!e.uid) e.uid = parse_int(value);
  } else if (name == "task") {
    if (e.task.empty()) e.task = display(value, 256);
  } else if (name == "cgroup") {
    if (e.cgroup.empty()) e.cgroup = display(value, 1024);
  } else if (!value.empty()) {
    e.fields.try_emplace(name, display(value, 1024));
  }
}

void EventBuilder::apply_catalog_fields(KernelEvent& e, const KernelRule& rule) const {
  bool known = false;
  if (rule.catalog == CatalogRef::kXid && e.code) {
    const XidInfo& x = rules_.xid(*e.code, known);
    if (!x.meaning.empty()) e.fields["meaning"] = x.meaning;
    if (!x.fault.empty()) e.fields["fault"] = x.fault;
    if (!known) e.fields["catalog"] = "unknown code";
    return;
  }
  const int t = ras_index(rule.catalog);
  if (t < 0 || e.block.empty()) return;
  const RasBlockInfo& b = rules_.ras(e.block, known);
  e.fields["ras_type"] = kRasTypes[static_cast<size_t>(t)];
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
    if (name == "device") {
      v = e.device;
    } else if (name == "task") {
      v = e.task;
    } else if (name == "block") {
      v = e.block;
    } else if (name == "cgroup") {
      v = e.cgroup;
    } else if (name == "step") {
      v = e.step;
    } else if (name == "pid" && e.pid) {
      v = std::to_string(*e.pid);
    } else if (name == "uid" && e.uid) {
      v = std::to_string(*e.uid);
    } else if (name == "code" && e.code) {
      v = std::to_string(*e.code);
    } else if (name == "job_id" && e.job_id) {
      v = std::to_string(*e.job_id);
    } else if (const auto it = e.fields.find(name); it != e.fields.end()) {
      v = it->second;
    }
    out += v.empty() ? "?" : v;
    i = close;
  }
  return out;
}

KernelEvent EventBuilder::build(const OpenRecord& r, const EventIdentity& id) const {
  const KernelRule& rule = rules_.rules()[r.rule];
  KernelEvent e;
  e.id = r.id;
  e.kind = *id.kind;
  e.severity = id.severity;
  e.action = *id.action;
  e.device = id.device;
  e.code = id.code;
  e.block = id.block;
  e.rule = rule.id;
  e.host = r.host.empty() ? host_ : r.host;
  e.boot_id = r.boot_id;
  e.time_usec = r.first_realtime;
  e.last_usec = r.last_realtime;
  e.count = 1;
  for (const auto& [name, value] : r.captures)
    apply_capture(e, name, value);
  apply_catalog_fields(e, rule);

  const std::string* summary_tmpl = &rule.summary;
  for (const size_t i : id.refiners) {
    const KernelRule& ref = rules_.rules()[rule.refined_by[i]];
    if (ref.sets_kind && ref.kind != rule.kind) e.fields.try_emplace("opened_as", rule.kind);
    if (ref.sets_summary) summary_tmpl = &ref.summary;
    for (const auto& [name, value] : r.refine_captures[i])
      apply_capture(e, name, value);
    auto& by = e.fields["refined_by"];
    by += by.empty() ? ref.id : "," + ref.id;
  }
  if (id.remedy != nullptr && !id.remedy->empty() && *id.remedy != "none")
    e.fields[kRemedyField] = *id.remedy;
  apply_job(e);
  if (r.first_monotonic >= 0) e.fields["monotonic_usec"] = std::to_string(r.first_monotonic);
  if (r.line_count > r.lines.size()) e.fields["lines_total"] = std::to_string(r.line_count);

  e.lines.reserve(r.lines.size());
  for (const auto& l : r.lines)
    e.lines.push_back(display(l, kMaxLineBytes));
  e.summary = display(summary_tmpl->empty() ? r.first_message : render_summary(*summary_tmpl, e),
                      kMaxSummaryBytes);
  return e;
}

void EventBuilder::fold_into(KernelEvent& into, const OpenRecord& r) {
  ++into.count;
  into.last_usec = std::max(into.last_usec, r.last_realtime);
  for (const auto& l : r.lines) {
    if (into.lines.size() >= KernelEvent::kMaxEventLines) break;
    into.lines.push_back(display(l, kMaxLineBytes));
  }
}

}  // namespace triage::collector
