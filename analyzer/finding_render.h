// How a finding reads in the reports: in triage.md, where it came from and what it says; in
// triage.json, its object. One renderer for every finding, whether a job's log, a node's kernel,
// Slurm or a metrics playbook produced it: report_render.cpp and the TSDB section
// (analyzer/tsdb/tsdb_markdown.cpp, tsdb_json.cpp) both go through it.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analyzer/finding.h"

namespace triage {

// Where the finding came from, as Markdown: "line 12 (task 3, host gpu-a019, <time>)", "kernel
// log of gpu-a019 (trusted)", "Slurm (trusted)", "`<file>` line 4".
std::string finding_where_md(const Finding& f);

// The finding's text for a fenced block: ANSI escapes removed, a cut text marked " [...]".
std::string finding_quote(const Finding& f);

// The start of the finding's text in a code span, for a mention on one line.
std::string finding_short_quote_md(const Finding& f);

// "<time> — <text>", or the text alone when the time is unknown: a finding as one line of a list
// that mixes it with other timed events. Plain text: the caller escapes it for Markdown.
std::string finding_timed_text(const Finding& f);

// The finding's object in triage.json (docs/analyze.md); a graded finding adds `severity` and
// `hosts`. Text stays verbatim: the caller's JSON writer repairs invalid UTF-8.
nlohmann::ordered_json finding_json(const Finding& f);

}  // namespace triage
