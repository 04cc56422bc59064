// triage.md and triage.json. Everything that came from a log is escaped for Markdown (quoted in
// fenced blocks or code spans, or with every markup character escaped), so no line a job printed
// can change the report's structure. JSON strings keep the text verbatim; invalid UTF-8 becomes
// U+FFFD.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analyzer/triage_report.h"

namespace triage {

std::string render_markdown(const Triage& t);
// Key order follows the schema in docs/analyze.md.
nlohmann::ordered_json triage_to_json(const Triage& t);
std::string render_json(const Triage& t);

}  // namespace triage
