// The TSDB section of triage.md, in the layout of the diagnosis procedure: header lines, findings,
// metric evidence, anomalies, correlation with triage, next steps. Everything that came from the
// TSDB (host names, label values) goes through the Markdown escapers.
#include <algorithm>
#include <cmath>

#include "analyzer/finding_render.h"
#include "analyzer/tsdb/playbook_context.h"
#include "analyzer/tsdb/tsdb.h"
#include "common/text.h"

namespace triage::tsdb {

namespace {

std::string heading(int level, const std::string& text) {
  return std::string(static_cast<size_t>(level), '#') + " " + text + "\n\n";
}

std::string table(const EvidenceTable& t) {
  std::string out;
  out += "| ";
  for (const auto& c : t.columns)
    out += md_table_cell(c) + " | ";
  out.pop_back();
  out += "\n|";
  for (size_t i = 0; i < t.columns.size(); ++i)
    out += "---|";
  out += "\n";
  for (const auto& r : t.rows) {
    out += "| ";
    for (size_t i = 0; i < t.columns.size(); ++i)
      out += (i < r.size() ? md_table_cell(r[i]) : std::string()) + " | ";
    out.pop_back();
    out += "\n";
  }
  return out + "\n";
}

std::string source_line(const TsdbResult& r) {
  const auto& s = r.source;
  if (s.kind == "cluster")
    return "cluster Prometheus " + md_code_span(s.url) + " (label " + md_code_span(s.host_label) +
           ")";
  if (s.kind == "live-head") return "the live job's own Prometheus at " + md_code_span(s.url);
  if (s.kind == "job-tsdb") {
    return "a private read-only copy of " + md_code_span(s.path) +
           (s.wal_included ? " (write-ahead log included)" : "") + ", served on " +
           md_code_span(s.url) + " and removed afterwards";
  }
  if (s.kind == "job-tsdb-blocks") {
    return "a private copy of the persisted blocks of " + md_code_span(s.path) +
           " (live job: the write-ahead log" +
           (s.missing_from ? " after " + fmt_time(*s.missing_from) : std::string()) +
           " is not visible)";
  }
  return "none";
}

std::string numbered(const std::vector<std::string>& items) {
  std::string md;
  for (size_t i = 0; i < items.size(); ++i)
    md += std::to_string(i + 1) + ". " + md_inline(items[i]) + "\n";
  return md + "\n";
}

std::string notes_section(const TsdbResult& r, int h) {
  std::vector<std::string> all_notes = r.notes;
  for (const auto& p : r.playbooks) {
    for (const auto& n : p.notes)
      all_notes.push_back("playbook " + std::to_string(p.number) + ": " + n);
  }
  if (all_notes.empty()) return "";
  std::string md = heading(h + 1, "Notes");
  for (const auto& n : all_notes)
    md += "- " + md_inline(n) + "\n";
  return md + "\n";
}

}  // namespace

std::string TsdbResult::render_markdown(const MarkdownOptions& o) const {
  const int h = std::clamp(o.heading_level, 1, 5);
  std::string md =
      heading(h, "TSDB Diagnosis: " + md_inline(job_dir.empty() ? source.url : job_dir));
  md += "**Analysis type:** " + md_inline(analysis_type) + "  \n";
  if (available && end > start) {
    md += "**Time window:** " + fmt_time(start) + " to " + fmt_time(end) + " (" +
          format_duration(end - start) + ")  \n";
  }
  if (!hosts.empty()) {
    md += "**Nodes:** " + std::to_string(hosts.size()) + " (" + md_inline(list_names(hosts, 16)) +
          ")  \n";
  }
  md += "**Source:** " + source_line(*this) + "  \n";
  if (!gpu.model.empty())
    md += "**GPU model:** " + md_inline(gpu.model) + " (from " + md_inline(gpu.basis) + ")  \n";
  if (guard.status != "skipped") {
    md += "**Database check:** " + md_inline(guard.status) +
          (guard.reason.empty() ? "" : " — " + md_inline(guard.reason)) + "\n";
  }
  md += "\n";
  if (!o.svg_name.empty() && (!timeline.steps.empty() || !timeline.power.empty())) {
    md += "![TSDB timeline: training step, GPU power and utilisation per host](" + o.svg_name +
          ")\n\n";
  }

  md += heading(h + 1, "Findings");
  if (!available || refused || playbooks.empty()) {
    md += refused ? "The diagnosis was refused: " + md_inline(guard.reason) + "\n\n"
                  : "No metrics could be read for this job (see the notes below); the report above "
                    "rests on the log "
                    "and the nodes' kernels alone.\n\n";
  }
  if (!available || refused) {
    // Nothing was measured: no evidence, anomaly or correlation sections that would read as "all
    // clear". Only why, and what to do about it.
    if (!correlation.text.empty()) {
      md += heading(h + 1, "Correlation with triage");
      md += md_inline(correlation.text) + "\n\n";
    }
    if (!recommendations.empty())
      md += heading(h + 1, "Recommended next steps") + numbered(recommendations);
    return md + notes_section(*this, h);
  }
  for (const auto& p : playbooks) {
    md += "- **Playbook " + std::to_string(p.number) + " (" + md_inline(p.id) +
          "): " + md_code_span(p.verdict) + ".** " + md_inline(p.summary) + "\n";
  }
  if (!playbooks.empty()) md += "\n";
  if (!chain.text.empty()) md += "**Chain:** " + md_inline(chain.text) + "\n\n";

  bool any_table = false;
  for (const auto& p : playbooks)
    any_table = any_table || !p.tables.empty();
  if (any_table) {
    md += heading(h + 1, "Metric evidence");
    for (const auto& p : playbooks) {
      for (const auto& t : p.tables) {
        md += "**" + md_inline(t.title) + "**\n\n" + table(t);
      }
      size_t nq = 0;
      for (const auto& e : p.evidence)
        nq += e.kind != "labels";
      if (nq > 0) {
        md += "<details><summary>Playbook " + std::to_string(p.number) + " queries (" +
              std::to_string(nq) + ")</summary>\n\n";
        std::vector<std::string> lines;
        for (const auto& e : p.evidence) {
          if (e.kind == "labels") continue;
          std::string l = e.query + "   # " + e.kind + " @ " + fmt_time(e.time) + ", " +
                          std::to_string(e.total_rows) + " rows";
          if (!e.error.empty()) l += ", ERROR: " + e.error;
          lines.push_back(printable(truncate_utf8(l, 600)));
        }
        md += md_code_block(lines, "promql") + "\n</details>\n\n";
      }
    }
  }

  md += heading(h + 1, "Anomalies detected");
  std::vector<std::string> items;
  for (const auto& p : playbooks) {
    for (const auto& f : p.findings) {
      if (f.severity == Severity::kInfo) continue;
      items.push_back(finding_timed_text(f));
    }
    for (const auto& a : p.anomalies) {
      if (a.kind != "cause") continue;
      const std::string line = fmt_time(a.time) + " — " + a.text;
      if (std::find(items.begin(), items.end(), line) == items.end()) items.push_back(line);
    }
  }
  for (const auto& v : hardware) {
    items.push_back(v.host + " (" + v.component + "): " + v.verdict + ", " + v.action + " — " +
                    v.reason);
  }
  if (items.empty()) {
    md += "None: every host and GPU stayed within the thresholds in the window.\n\n";
  } else {
    std::sort(items.begin(), items.end());
    items.erase(std::unique(items.begin(), items.end()), items.end());
    for (const auto& i : items)
      md += "- " + md_inline(i) + "\n";
    md += "\n";
  }
  std::vector<std::string> untrusted;
  for (const auto& v : hardware) {
    if (!v.source_trusted) add_unique(untrusted, v.host);
  }
  if (!untrusted.empty()) {
    md +=
        "Hardware verdicts above come from the job's own TSDB, which lives in a user-writable "
        "directory: confirm them "
        "with the node's kernel log before acting on " +
        md_inline(list_names(untrusted)) + ".\n\n";
  }

  md += heading(h + 1, "Correlation with triage");
  md += md_inline(correlation.text.empty() ? "No playbook ran." : correlation.text) + "\n\n";

  md += heading(h + 1, "Recommended next steps");
  md += recommendations.empty() ? "Nothing more from the metrics.\n\n" : numbered(recommendations);
  return md + notes_section(*this, h);
}

}  // namespace triage::tsdb
