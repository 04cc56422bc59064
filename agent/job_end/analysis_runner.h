// Running `slurm-triage analyze` for an ended job: forked, dropped to the job owner's uid, gid and
// groups before exec (root never opens the user's files), evidence written to its stdin, stdout
// and stderr captured up to a cap, killed (with its process group) when it runs too long. All of
// it on the event loop: nothing here blocks.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/base/event_loop.h"
#include "common/privilege.h"

namespace triage::agent {

struct AnalysisRequest {
  uint64_t job_id = 0;
  std::vector<std::string> argv;  // argv[0] is the program path
  Identity who;
  std::string home;  // the owner's home directory, for HOME
  std::string stdin_data;
  int64_t timeout_ms = 600000;
  size_t output_max = 1u << 20;
};

struct AnalysisOutcome {
  uint64_t job_id = 0;
  bool started = false;
  bool timed_out = false;
  int wait_status = 0;
  std::string out;
  bool out_truncated = false;
  std::string err;  // stderr (capped), or why the program could not be started
  int64_t duration_ms = 0;
};

class AnalysisRunner {
 public:
  explicit AnalysisRunner(EventLoop& loop);
  ~AnalysisRunner();
  AnalysisRunner(const AnalysisRunner&) = delete;
  AnalysisRunner& operator=(const AnalysisRunner&) = delete;

  using Done = std::function<void(AnalysisOutcome)>;
  // Starts the program; `done` runs on the loop when it has ended (or could not start).
  void start(AnalysisRequest request, Done done);
  size_t running() const { return runs_.size(); }
  // Kills every running analysis (shutdown); their `done` callbacks are not called.
  void kill_all();
  // Kills and reaps the job's running analyses, whose `done` callbacks are not called; once it
  // returns none of them can write anything more. Returns how many there were.
  size_t kill_job(uint64_t job_id);

 private:
  struct Run;
  void on_output(uint64_t run_id, int fd, bool is_stdout);
  void on_stdin(uint64_t run_id);
  void on_exit(uint64_t run_id);
  void poll_exit(uint64_t run_id);
  void finish(uint64_t run_id);
  void stop_watching(Run& r);
  // Kills and reaps the runs `which` picks, without their `done` callbacks; how many there were.
  size_t kill_if(const std::function<bool(const Run&)>& which);

  EventLoop& loop_;
  std::map<uint64_t, std::unique_ptr<Run>> runs_;
  uint64_t next_id_ = 1;
};

}  // namespace triage::agent
