/* A node "boot" for scripts/dev-cluster's reboots: preloaded into a restarted slurmd, it makes
 * sysinfo() report the uptime since TRIAGE_FAKE_BOOT_TIME (seconds since the epoch), as if the
 * host had booted then.
 *
 * slurmctld takes a node's boot time as (its own clock) - (the uptime slurmd reports). slurmd -b,
 * the way to fake a reboot without one, reports the uptime since slurmd started, and Slurm 22.05
 * computes it from sysinfo()'s whole seconds against the first reading: the boot time it yields
 * drifts by a second with the phase between the two clocks. A boot in the same second as the
 * node's first registration then reads, at a registration a second later, as a boot after the
 * last response: "Node unexpectedly rebooted", and the node goes DOWN after triage resumed it. A
 * real boot is many seconds before slurmd's first registration; this puts the fake one a second
 * before it and counts from the wall clock, so the boot time slurmctld computes stays put.
 *
 * Built by scripts/dev-cluster with the system compiler, never sanitized (slurmd is Debian's).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/sysinfo.h>
#include <time.h>

int sysinfo(struct sysinfo *info) {
  static int (*real_sysinfo)(struct sysinfo *);
  if (real_sysinfo == NULL) {
    real_sysinfo = (int (*)(struct sysinfo *))dlsym(RTLD_NEXT, "sysinfo");
    if (real_sysinfo == NULL) {
      errno = ENOSYS;
      return -1;
    }
  }
  int rc = real_sysinfo(info);
  const char *text = getenv("TRIAGE_FAKE_BOOT_TIME");
  if (rc != 0 || text == NULL || *text == '\0') return rc;
  int saved_errno = errno;
  char *end = NULL;
  errno = 0;
  long long boot = strtoll(text, &end, 10);
  time_t now = time(NULL);
  if (errno == 0 && *end == '\0' && boot > 0 && boot <= (long long)now) info->uptime = (long)(now - boot);
  errno = saved_errno;
  return rc;
}
