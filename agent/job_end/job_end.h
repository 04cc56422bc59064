// The decisions of the job-end hand-over, as plain functions: which node runs the analysis, when
// the kernel's evidence is complete enough to gather, what the job's facts are when slurmctld
// cannot be asked, which file the analyzer is pointed at, where
// the report goes, and what is kept of the result.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/history/outcome_record.h"
#include "agent/job_end/analysis_runner.h"
#include "agent/node/job_table.h"
#include "common/model.h"

namespace triage::agent {

// The batch host runs the analysis (it saw the batch step, or the epilog named it); when nobody
// knows the batch host, the first node of the job's list does.
bool is_analysis_leader(const JobRecord& job, const std::string& self);

// How far a kernel log reader has read, as the job-end pipeline sees it.
struct KernelSourceProgress {
  bool live = false;           // reading, or about to; a failing or absent source is not
  int64_t caught_up_usec = 0;  // monotonic start of its latest look that found nothing more
};

// Whether the evidence of a job whose end the pipeline took up at `ended_usec` can be gathered at
// `now_usec` (both monotonic): once every live kernel source has found nothing more to read in a
// look begun at or after `ended_usec`, or once `max_wait_usec` has passed, whichever comes first.
bool evidence_settled(const std::vector<KernelSourceProgress>& sources, int64_t ended_usec,
                      int64_t now_usec, int64_t max_wait_usec);

// The job's facts from what the epilog sent (source "epilog"). The raw StdOut pattern is expanded
// the way slurmstepd expands it for the batch step.
JobFacts facts_from_epilog(const JobRecord& job, const std::string& self);

// slurmctld's facts completed with what only the epilog knows (the --triage mode, the raw
// pattern) and what slurmctld may have left out.
JobFacts merge_facts(JobFacts from_ctld, const JobFacts& from_epilog);

// The owner's home directory (HOME for the analyzer), "" when the passwd database has none.
std::string home_of(uid_t uid);

// What the analyzer is pointed at: the expanded StdOut file; failing that the work dir; failing
// that the job id.
std::string analysis_target(const JobFacts& facts);

// The admin's ReportPath pattern expanded for this job ("" when not configured).
std::string expand_report_path(const std::string& pattern, const JobFacts& facts);

std::vector<std::string> analyzer_argv(const std::string& analyzer, const std::string& mode,
                                       int64_t stall_after_sec, const std::string& target);

// Whether the analyzer's exit means it did its work. Exit 1 is "the job failed" (the analysis
// worked); exits 2 and up (usage, unreadable input, unwritable report, bad rules) and signals are
// the analysis failing.
bool analysis_succeeded(int wait_status);

// The root-owned summary kept in the spool: {"r":"analysis", ...}. "result" is ok, failed (the
// analyzer could not start, exited with one of its own error codes, or was killed) or timeout.
nlohmann::json analysis_summary(const JobFacts& facts, const std::string& target,
                                const AnalysisOutcome& outcome,
                                const std::vector<std::string>& unreachable, int64_t now_usec);
nlohmann::json skipped_summary(uint64_t job_id, const std::string& why, int64_t now_usec);

// A job whose analysis worked, as the job-end pipeline hands it on to what follows the analysis:
// the summary in Slurm's accounting and the requeue decision (agent/requeue/job_requeue.h).
struct AnalysedJob {
  JobFacts facts;
  OutcomeRecord record;          // class, blame, implicated nodes, status
  std::string report_path;       // triage.md as the analyzer wrote it ("" when it did not say)
  int requeue_max = 0;           // the job's --triage-requeue=N (0: not asked)
  bool requeue_allowed = false;  // the plugstack's requeue=allow when the job registered
  AnalysisRequest request;       // the analysis as it ran, for a report pass with a requeue note
};

}  // namespace triage::agent
