#include "analyzer/job_analysis.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "analyzer/extra_logs.h"
#include "analyzer/line_text.h"
#include "analyzer/slurm_state_probe.h"
#include "common/safe_io.h"

namespace triage {

namespace {

std::string upper(std::string s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
  }
  return s;
}

}  // namespace

JobReport analyze_job(const JobTarget& target, const ScanPlan& plan, const Evidence* evidence,
                      const AnalysisOptions& options) {
  JobReport rep;
  DiagnosisInput in;
  in.catalog = &plan.catalog();
  in.evidence = evidence;
  in.now_usec = options.now_usec;
  static_cast<JobIdentity&>(in) = target;
  in.mode = options.mode;
  in.stall = options.stall;
  if (evidence != nullptr) {
    if (evidence->job.job_id != 0) in.job_id = evidence->job.job_id;
    if (!evidence->job.name.empty()) in.job_name = evidence->job.name;
    in.user = evidence->job.user;
  }
  if (!target.error.empty()) {
    in.notes.push_back(target.error);
    rep.input_error = true;
  }

  ScanOptions scan_opt;
  if (evidence != nullptr && evidence->job.start_time > 0)
    scan_opt.year_hint = utc_year(evidence->job.start_time * 1000000);
  ScanResult scan;
  bool scanned = false;
  if (!target.log_path.empty()) {
    try {
      // The `log` symlink is followed here, as the job's owner: the kernel decides what they may
      // read.
      UniqueFd fd = open_regular_file(target.log_path, false);
      struct stat st {};
      if (::fstat(fd.get(), &st) == 0) {
        in.log_mtime_usec =
            static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000 + st.st_mtim.tv_nsec / 1000;
        rep.log_mode = st.st_mode & 07777;
      }
      scan = scan_log(fd.get(), plan, scan_opt);
      scanned = true;
    } catch (const std::system_error& e) {
      const int err = e.code().value();
      std::string why =
          err == EACCES ? "permission denied: the job's owner cannot read it" : e.code().message();
      if (err == ENOENT) why = "it does not exist (a dangling log symlink?)";
      if (err == EINVAL) {
        // open_regular_file says what the path turned out to be: "<path> is a FIFO, not a
        // regular file: Invalid argument" becomes "it is a FIFO, not a regular file".
        const std::string w = e.what();
        const size_t is = w.rfind(" is ");
        const size_t end = w.rfind(": ");
        if (is != std::string::npos && end != std::string::npos && end > is)
          why = "it" + w.substr(is, end - is);
      }
      in.notes.push_back("Could not read the log " + target.log_path + ": " + why +
                         ". Its content is not in this report.");
      rep.input_error = true;
    }
  } else if (target.error.empty()) {
    in.notes.push_back("No log was found for this job.");
    rep.input_error = true;
  }
  if (scanned) in.scan = &scan;

  UniqueFd dirfd;
  ExtraLogs extra;
  if (!target.job_dir.empty()) {
    try {
      dirfd = open_dir(target.job_dir, false);
      struct stat st {};
      in.has_tsdb_dir = ::fstatat(dirfd.get(), "prometheus", &st, 0) == 0 && S_ISDIR(st.st_mode);
      extra = scan_extra_logs(dirfd.get(), plan, options.mode == "full");
      for (const auto& n : extra.notes)
        in.notes.push_back(n);
      if (extra.restore.restored_step || extra.restore.fresh) in.worker_restore = &extra.restore;
      if (extra.any_findings) in.extra_scans.push_back(&extra.merged);
      if (!extra.collectives.empty()) in.extra_collectives = &extra.collectives;
    } catch (const std::system_error& e) {
      in.notes.push_back("Could not open the job directory " + target.job_dir + ": " +
                         e.code().message() + ".");
    }
  }

  // Slurm's view: the option, the agent's evidence, or squeue (already as the job's owner).
  if (!options.slurm_state_option.empty() && options.slurm_state_option != "none") {
    in.slurm_state = upper(options.slurm_state_option);
    in.slurm_state_source = "option";
  } else if (evidence != nullptr && !evidence->job.state.empty()) {
    in.slurm_state = upper(evidence->job.state);
    in.slurm_state_source = "evidence";
  } else if (options.slurm_state_option.empty() && in.job_id) {
    const SlurmStateAnswer a = query_squeue_state(*in.job_id, options.squeue_timeout_ms);
    if (a.available) {
      in.slurm_state = a.state;
      in.slurm_state_source = "squeue";
    } else {
      in.notes.push_back("Slurm state unavailable: " + a.detail + ".");
    }
  }

  rep.triage = diagnose(in);
  if (options.tsdb_hook) options.tsdb_hook(rep.triage, dirfd ? dirfd.get() : -1);
  return rep;
}

}  // namespace triage
