// Timing another program the way every comparison in bench/ does: pinned to one CPU, its output
// kept short, its wall and CPU time and peak memory taken from the kernel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace triage::bench {

struct Measure {
  double seconds = 0;
  double cpu_seconds = 0;  // user + system: what the run cost, whatever else the machine was doing
  long max_rss_kb = 0;
  int status = -1;  // exit status, 128 + the signal when killed; 127 when it could not start
  std::string out;  // the first 4 KiB of its stdout
};

// Pins the calling thread (a process that has started none yet: the process) to `cpu`.
void pin_to_cpu(int cpu);

// Runs argv with stdout captured (first 4 KiB) and stderr to /dev/null, pinned to `cpu`.
Measure run(const std::vector<std::string>& args, int cpu);

// The fastest of `runs` runs by wall time, with the least CPU time and the largest peak RSS of all.
Measure best_of(const std::vector<std::string>& args, int cpu, int runs);

// "512", "64K", "100M", "1G" (either case) as bytes.
uint64_t parse_size(const char* s);

}  // namespace triage::bench
