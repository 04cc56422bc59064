// The names of a report's files that both the analyzer (which writes them) and the agent (which
// points at them from the job's accounting comment) must agree on.
#pragma once

#include <string>

namespace triage {

// The copy of a report file kept for one attempt of a requeued job: "triage.md" ->
// "triage.attempt0.md", "/d/77.json" -> "/d/77.attempt0.json"; a name without an extension gets
// ".attempt<N>" appended.
std::string attempt_report_name(const std::string& name, int attempt);

}  // namespace triage
