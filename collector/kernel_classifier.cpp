// Kernel records in, KernelEvents out. Each line is matched once against every rule (one combined
// automaton), then either extends a record being assembled, interrupts one, opens a new one, or
// is dropped. Finished records become events (event_builder), floods fold (event_folder) and Xid
// consequences name their cause (xid_cause_tracker).
//
// Determinism is what makes restarts exact: nothing here looks at the wall clock or at anything
// but the records since the classifier last held nothing, so the safe resume position is simply
// the last record after which it held nothing.
#include <algorithm>

#include "collector/event_builder.h"
#include "collector/event_folder.h"
#include "collector/kernel_message.h"
#include "collector/kernel_pipeline.h"
#include "collector/kernel_rules.h"
#include "collector/open_record.h"
#include "collector/xid_cause_tracker.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage::collector {

namespace {

constexpr size_t kMaxOpenRecords = 64;
constexpr int64_t kClockStepBack = 1'000'000;

// The clock records are compared on: the kernel's monotonic time when printed, else wall time.
int64_t record_time(const KernelRecord& r) {
  if (r.monotonic_usec >= 0) return r.monotonic_usec;
  if (r.realtime_usec > 0) return r.realtime_usec;
  return -1;
}

bool contains(const std::vector<size_t>& v, size_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

struct KernelClassifier::Impl {
  Impl(std::shared_ptr<const KernelRules> r, std::string h, const KernelClassifierOptions& o)
      : rules(std::move(r)),
        opt(o),
        host(std::move(h)),
        builder(*rules, host),
        folder(o.fold_quiet_usec, o.fold_max_span_usec),
        causes(*rules) {}

  std::shared_ptr<const KernelRules> rules;
  KernelClassifierOptions opt;
  std::string host;
  EventBuilder builder;
  EventFolder folder;
  XidCauseTracker causes;
  std::vector<OpenRecord> open;
  KernelRules::LineMatch lm;

  std::string safe_position;
  std::string last_position;
  bool fed = false;
  std::string boot;
  int64_t last_monotonic = -1;
  int64_t hold_start = -1;
  KernelClassifierStats stats;

  bool holding() const { return !open.empty() || !folder.empty() || !causes.empty(); }

  void finish(OpenRecord&& r, std::vector<KernelEvent>& out) {
    const KernelRule& rule = rules->rules()[r.rule];
    const EventIdentity ident = builder.identify(r);
    auto make = [&] {
      KernelEvent e = builder.build(r, ident);
      causes.name_cause(e, r.first_time);
      return e;
    };
    std::string id;
    if (rule.fold) {
      bool merged = false;
      id = folder.add(builder.flood_key(r, ident), r.first_time, r.last_time, r.last_fed_wall, out,
                      merged, make, [&](KernelEvent& into) { EventBuilder::fold_into(into, r); });
      if (merged) ++stats.folded;
    } else {
      out.push_back(make());
      id = out.back().id;
    }
    if (causes.may_be_cause(*ident.kind, ident.code, ident.device)) {
      causes.remember(ident.device, id, r.first_time);
    }
  }

  void close(size_t i, std::vector<KernelEvent>& out) {
    OpenRecord r = std::move(open[i]);
    open.erase(open.begin() + static_cast<std::ptrdiff_t>(i));
    finish(std::move(r), out);
  }

  void close_all(std::vector<KernelEvent>& out) {
    while (!open.empty())
      close(0, out);
    folder.flush(0, 0, out);
    causes.clear();
  }

  void expire(int64_t now, std::vector<KernelEvent>& out) {
    for (size_t i = 0; i < open.size();) {
      const OpenRecord& r = open[i];
      if (r.last_time >= 0 && now - r.last_time > rules->rules()[r.rule].gap_usec) {
        close(i, out);
      } else {
        ++i;
      }
    }
    folder.expire(now, out);
    causes.expire(now);
  }

  static void append(OpenRecord& r, const KernelRules& rules, const KernelRecord& rec,
                     std::string_view verbatim, std::string_view message, int64_t t) {
    r.add_line(rules, verbatim, message);
    if (t >= 0) {
      if (r.first_time < 0) r.first_time = t;
      r.last_time = t;
    }
    if (rec.realtime_usec > 0) {
      if (r.first_realtime == 0) r.first_realtime = rec.realtime_usec;
      r.last_realtime = rec.realtime_usec;
    }
    if (r.first_monotonic < 0) r.first_monotonic = rec.monotonic_usec;
    r.last_fed_wall = monotonic_usec();
  }

  // Runs `patterns` over the message; on the first match its captures go into `r`.
  static bool take(const std::vector<RulePattern>& patterns, std::string_view message,
                   OpenRecord& r) {
    for (const auto& p : patterns) {
      if (match_pattern(p, message,
                        [&](const std::string& n, std::string_view v) { r.capture(n, v); })) {
        return true;
      }
    }
    return false;
  }

  bool same_device(std::string_view line_device, const OpenRecord& r) const {
    return line_device.empty() || r.device.empty() || canonical_device(line_device) == r.device;
  }

  void process_line(const KernelRecord& rec, std::string_view verbatim, std::string_view message,
                    size_t piece, int64_t t, std::vector<KernelEvent>& out) {
    const KernelRules& rs = *rules;
    rs.match(message, lm);
    const std::string_view line_device = prefix_device(message);

    // 1. A record being assembled takes the line (the latest one first).
    for (size_t i = open.size(); i-- > 0;) {
      OpenRecord& r = open[i];
      const KernelRule& rule = rs.rules()[r.rule];
      if (!same_device(line_device, r)) continue;
      const bool ends = take(rule.ends, message, r);
      bool accepted = ends || take(rule.continues, message, r);
      if (!accepted && rule.body == RecordBody::kAny) accepted = lm.rules.empty();
      if (!accepted) continue;
      append(r, rs, rec, verbatim, message, t);
      if (ends || r.line_count >= rule.max_lines) close(i, out);
      return;
    }

    // 2. Otherwise the line ends the listed records of its own device (or, when it names no
    //    device, those that name none), unless it merely opens an event of another rule
    //    (interleaved output); a new record of the same rule ends the old one.
    const std::string canonical_line_device = open.empty() ? "" : canonical_device(line_device);
    for (size_t i = open.size(); i-- > 0;) {
      const OpenRecord& r = open[i];
      if (canonical_line_device != r.device) continue;
      const bool same_rule = contains(lm.rules, r.rule);
      const bool other_rule = !lm.rules.empty() && !same_rule;
      const bool listed = rs.rules()[r.rule].body == RecordBody::kListed;
      if (same_rule || (listed && !other_rule)) close(i, out);
    }

    if (lm.harmless) {
      ++stats.harmless;
      return;
    }
    if (lm.rules.empty()) return;

    // 3. The first matching rule (in load order) opens a record.
    const size_t ri = lm.rules.front();
    const KernelRule& rule = rs.rules()[ri];
    OpenRecord r;
    if (!rs.opens(ri, message,
                  [&](const std::string& n, std::string_view v) { r.capture(n, v); })) {
      return;
    }
    r.rule = ri;
    r.id = event_id_for(rec);
    if (piece > 0) r.id.append("/").append(std::to_string(piece));
    r.boot_id = rec.boot_id;
    r.host = rec.host;
    r.kernel_device = rec.kernel_device;
    r.first_message = std::string(message);
    // The opening line may also carry what continuation lines carry (an OOM report that starts at
    // its oom-kill: line because the header was filtered out).
    take(rule.continues, message, r);
    const std::string* dev = r.captures.find("device");
    r.device = canonical_device(dev != nullptr ? std::string_view(*dev) : line_device);
    append(r, rs, rec, verbatim, message, t);
    const bool single =
        rule.body == RecordBody::kListed && rule.continues.empty() && rule.ends.empty();
    if (single || take(rule.ends, message, r) || r.line_count >= rule.max_lines) {
      finish(std::move(r), out);
      return;
    }
    open.push_back(std::move(r));
    if (open.size() > kMaxOpenRecords) close(0, out);
  }

  void records_lost(const KernelRecord& rec, std::vector<KernelEvent>& out) {
    KernelEvent e;
    e.id = event_id_for(rec) + "!lost";
    e.kind = "records-lost";
    e.severity = Severity::kWarning;
    e.action = "none";
    e.rule = "records-lost";
    e.host = rec.host.empty() ? host : rec.host;
    e.boot_id = rec.boot_id;
    e.time_usec = rec.realtime_usec;
    e.last_usec = rec.realtime_usec;
    if (rec.lost_before > 0) {
      e.count = static_cast<uint64_t>(rec.lost_before);
      e.fields["lost"] = std::to_string(rec.lost_before);
      e.summary = std::to_string(rec.lost_before) +
                  " kernel log records were lost before this point (the reader fell behind)";
      stats.lost += static_cast<uint64_t>(rec.lost_before);
    } else {
      e.fields["lost"] = "unknown";
      e.summary = "kernel log records may have been lost here (the saved position was gone)";
    }
    out.push_back(std::move(e));
  }
};

KernelClassifier::KernelClassifier(std::shared_ptr<const KernelRules> rules, std::string host,
                                   const KernelClassifierOptions& options)
    : impl_(std::make_unique<Impl>(std::move(rules), std::move(host), options)) {}

KernelClassifier::~KernelClassifier() = default;

void KernelClassifier::set_initial_position(std::string position) {
  if (!impl_->fed) impl_->safe_position = std::move(position);
}

void KernelClassifier::feed(const KernelRecord& rec, std::vector<KernelEvent>& out) {
  Impl& m = *impl_;
  const size_t before = out.size();
  ++m.stats.records;
  m.fed = true;
  const int64_t t = record_time(rec);

  if (rec.facility > 0) {
    ++m.stats.not_kernel;
  } else {
    if (m.holding()) {
      // Nothing continues across a reboot, or across the clock stepping back (dmesg output of
      // several boots pasted together).
      const bool new_boot = !rec.boot_id.empty() && !m.boot.empty() && rec.boot_id != m.boot;
      const bool stepped_back = rec.monotonic_usec >= 0 && m.last_monotonic >= 0 &&
                                rec.monotonic_usec + kClockStepBack < m.last_monotonic;
      if (new_boot || stepped_back) m.close_all(out);
    }
    if (!rec.boot_id.empty()) m.boot = rec.boot_id;
    if (rec.monotonic_usec >= 0) m.last_monotonic = rec.monotonic_usec;
    if (rec.lost_before != 0) {
      m.close_all(out);
      m.records_lost(rec, out);
    }
    if (t >= 0) {
      m.expire(t, out);
      if (m.holding() && m.hold_start >= 0 && t - m.hold_start > m.opt.max_hold_usec) {
        m.close_all(out);
      }
    }
    // Time alone may have completed everything held: then resuming right before this record is
    // as good as having gone through the previous ones.
    if (!m.holding()) {
      m.hold_start = -1;
      if (!m.last_position.empty()) m.safe_position = m.last_position;
    }
    // A kmsg record may carry several lines (the NVIDIA driver prints some messages that way).
    const std::string_view text = rec.text;
    size_t start = 0;
    for (size_t piece = 0;; ++piece) {
      const size_t nl = text.find('\n', start);
      const std::string_view verbatim =
          text.substr(start, nl == std::string_view::npos ? nl : nl - start);
      std::string_view message = verbatim;
      if (piece == 0) {
        message = rec.message_offset <= verbatim.size() ? verbatim.substr(rec.message_offset)
                                                        : std::string_view{};
      }
      m.process_line(rec, verbatim, message, piece, t, out);
      if (nl == std::string_view::npos) break;
      start = nl + 1;
    }
  }

  if (!m.holding()) {
    m.safe_position = rec.position;
    m.hold_start = -1;
  } else if (m.hold_start < 0) {
    m.hold_start = t;
  }
  m.last_position = rec.position;
  m.stats.events += out.size() - before;
}

void KernelClassifier::flush(std::vector<KernelEvent>& out, int64_t idle_usec) {
  Impl& m = *impl_;
  const size_t before = out.size();
  const int64_t wall = monotonic_usec();
  for (size_t i = 0; i < m.open.size();) {
    if (idle_usec == 0 || wall - m.open[i].last_fed_wall >= idle_usec) {
      m.close(i, out);
    } else {
      ++i;
    }
  }
  m.folder.flush(wall, idle_usec, out);
  if (idle_usec == 0) m.causes.clear();
  if (!m.holding() && m.fed) {
    m.safe_position = m.last_position;
    m.hold_start = -1;
  }
  m.stats.events += out.size() - before;
}

std::string KernelClassifier::safe_resume_position() const {
  return impl_->safe_position;
}

KernelClassifierStats KernelClassifier::stats() const {
  return impl_->stats;
}

}  // namespace triage::collector
