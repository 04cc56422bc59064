// A benchmark's own CPU time and memory, as the kernel accounts them.
#pragma once

#include <sys/resource.h>

namespace triage::bench {

// User plus system time of a getrusage() answer, in seconds.
double cpu_seconds(const rusage& r);

// CPU time of the whole process (every thread), in seconds.
double process_cpu_seconds();

// CPU time of the waited-for children, in seconds.
double children_cpu_seconds();

// A "Key:" line of /proc/self/status in KiB ("VmRSS:", "VmHWM:"), or -1.
long status_kib(const char* key);

}  // namespace triage::bench
