// Whose fault a job's failure was. The primary class's default comes from the rules (`blame`);
// the class's `blame-when` lines refine it from the log's own words (a FileNotFoundError is a path
// the job was given); trusted node evidence overrides both: a node's kernel saw hardware fail
// during the job (platform), or the kernel OOM killer acted inside the job's own memory limit
// (user-config) or on the whole node (platform). The decision and its words are pure functions of
// the report's data.
#pragma once

#include <optional>
#include <string>

#include "analyzer/blame.h"
#include "analyzer/signature_catalog.h"
#include "analyzer/triage_report.h"

namespace triage {

struct BlameVerdict {
  std::optional<Blame> blame;  // none when nothing failed
  std::string basis;           // the evidence that decided it, in one line
  bool trusted = false;        // basis is a node's kernel or Slurm, not the log's word
  std::string line;            // the evidence line that names the failure best, quoted
};

// The blame of a report whose status, primary failure, evidence and node table are decided: none
// for a job that completed or runs; else trusted node evidence, else the first of the class's
// `blame-when` refinements that matches an evidence line, else the blame of the vocabulary entry
// whose token named the failure (when it gives one), else the class's default.
BlameVerdict decide_blame(const Triage& t, const SignatureCatalog& catalog);

// The report's first words for a decided blame: who is at fault, what showed it, and what to do
// ("Not your code: ... Resubmit; gpu-a017 is recommended for drain."); empty without a blame.
std::string blame_summary(const Triage& t, const BlameVerdict& v);

}  // namespace triage
