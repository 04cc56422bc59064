#!/usr/bin/env bash
# The .deb on the Debian release it was built for, as a compute node of that release has it: in
# a root with only Debian's slurmd, slurm-client, munge and systemd (scripts/debian-root
# bookworm-node or trixie-node), the package
#   - pins the exact Slurm it was built against, and that is the root's Slurm;
#   - installs as an admin installs a .deb, `apt-get install ./slurm-triage.deb`: dpkg unpacks it
#     and apt takes its dependencies (libraries) from the release's archive, so they must exist
#     there, the pinned Slurm at the root's own version (no --force-depends anywhere);
#   - has a unit `systemd-analyze verify` accepts;
#   - has a plugin that the release's own sbatch and slurmd load and run: sbatch --help lists
#     --triage, and a job's end reaches the plugin's inbox from slurmstepd (no agent runs, so the
#     plugin leaves its message there), with no "Incompatible Slurm plugin" in slurmd's log.
# The package and the libraries it pulled in are purged again at the end (apt-get purge
# --autoremove), leaving the cached root as it was. Needs deb.debian.org.
#   deb_release_test.sh DEB ROOT_NAME     (DEB inside this checkout; root needed)
# Starts a one-node Slurm in the root: takes /tmp/slurm-e2e.lock for it (about 10 s).
set -euo pipefail
cd "$(dirname "$0")/../.."

deb=$(realpath "$1")
root_name=$2
[[ "$deb" == "$PWD/"* ]] || { echo "deb_release_test: $deb is not inside $PWD (the root sees only the checkout)" >&2; exit 2; }
if [[ $(id -u) -ne 0 ]]; then
  echo "deb_release_test: needs root (debootstrap, chroot); skipped"
  exit 77
fi

# The pin, read from the package: slurm-wlm-basic-plugins (= V).
depends=$(dpkg-deb -f "$deb" Depends)
pin=$(grep -o 'slurm-wlm-basic-plugins (= [^)]*)' <<<"$depends" || true)
[[ -n "$pin" ]] || { echo "FAIL: $(basename "$deb") pins no Slurm: Depends: $depends" >&2; exit 1; }
version=${pin#*= }
version=${version%)}
grep -q "libslurm[0-9a-z]* (= $version)" <<<"$depends" ||
  { echo "FAIL: libslurm is not pinned to $version with it: Depends: $depends" >&2; exit 1; }
echo "ok: Depends: $depends"

scripts/debian-root "$root_name" run bash -c '
  set -euo pipefail
  deb=$1 version=$2
  failures=0
  fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
  pass() { echo "ok: $*"; }
  have=$(dpkg-query -W -f "\${Version}" slurm-wlm-basic-plugins)
  if [[ "$have" != "$version" ]]; then
    echo "FAIL: the package was built against Slurm $version, this root has $have (rebuild one of them)" >&2
    exit 1
  fi
  state=$(mktemp -d /tmp/triage-deb-release-XXXXXX)
  installed=0
  cleanup() {
    if [[ -f "$state/etc/slurm.conf" ]]; then scripts/slurm-cluster down --state "$state" >/dev/null 2>&1 || true; fi
    if ((installed)); then
      DEBIAN_FRONTEND=noninteractive apt-get purge -y -q --autoremove slurm-triage >/dev/null 2>&1 ||
        echo "FAIL: apt-get purge --autoremove slurm-triage" >&2
    fi
    rm -rf "$state"
  }
  trap cleanup EXIT

  export DEBIAN_FRONTEND=noninteractive
  # An interrupted earlier run may have left it behind.
  if dpkg-query -W slurm-triage >/dev/null 2>&1; then
    apt-get purge -y -q --autoremove slurm-triage >/dev/null 2>&1 || dpkg -P --force-all slurm-triage
  fi
  apt-get update -q >/dev/null 2>&1 || { echo "FAIL: apt-get update (deb.debian.org unreachable?)" >&2; exit 1; }
  installed=1
  if out=$(apt-get install -y -q --no-install-recommends "$deb" 2>&1) &&
     [[ "$(dpkg-query -W -f "\${Status}" slurm-triage)" == "install ok installed" ]]; then
    pass "apt-get install ./$(basename "$deb") on $(. /etc/os-release; echo "$PRETTY_NAME") with its Slurm $have"
  else
    echo "FAIL: apt-get install $deb: $(tail -n 20 <<<"$out")" >&2
    exit 1
  fi

  unit=/lib/systemd/system/slurm-triage-agent.service
  [[ -f $unit ]] || unit=/usr/lib/systemd/system/slurm-triage-agent.service
  if out=$(systemd-analyze verify "$unit" 2>&1) && [[ -z "$out" ]]; then
    pass "systemd-analyze verify $unit"
  else
    fail "systemd-analyze verify $unit: $out"
  fi

  plugin=$(grep -v "^#" /etc/slurm/plugstack.conf.d/triage.conf | awk "/spank_triage.so/ {print \$2; exit}")
  [[ -f "$plugin" ]] || { echo "FAIL: the plugstack snippet names $plugin, which is not installed" >&2; exit 1; }
  exec 8>/tmp/slurm-e2e.lock
  flock 8
  scripts/slurm-cluster up --state "$state" --plugin "$plugin" --owner-pid $$ >"$state.up" 2>&1 ||
    { cat "$state.up" >&2; rm -f "$state.up"; exit 1; }
  rm -f "$state.up"
  export SLURM_CONF=$state/etc/slurm.conf
  help=$(sbatch --help 2>&1 || true)
  if grep -q -- "--triage" <<<"$help"; then pass "sbatch lists --triage"; else fail "sbatch --help has no --triage"; fi
  mkdir -p "$state/job"
  id=$(sbatch --parsable --chdir="$state/job" --output=/dev/null --triage=basic --wrap "exit 3")
  for _ in $(seq 1 150); do
    st=$(scontrol -o show job "$id" | grep -o "JobState=[A-Z_]*" || true)
    [[ "$st" == JobState=FAILED || "$st" == JobState=COMPLETED ]] && break
    sleep 0.2
  done
  inbox=$state/triage/spool/inbox
  for _ in $(seq 1 50); do
    grep -qs "\"job_id\":$id\b" "$inbox"/* && break
    sleep 0.2
  done
  if grep -qs "\"job_id\":$id\b" "$inbox"/*; then
    pass "slurmd ran the packaged plugin: job $id ($st) left its end in the inbox"
  else
    fail "job $id ($st): nothing from the plugin in $inbox; slurmd log: $(tail -n 30 "$state/log/slurmd.log")"
  fi
  if grep -q "Incompatible Slurm plugin" "$state"/log/*.log; then fail "Slurm refused the plugin: $(grep -h "Incompatible Slurm plugin" "$state"/log/*.log)"; fi
  if ((failures > 0)); then echo "$failures check(s) failed" >&2; exit 1; fi
  echo "deb release test ($(. /etc/os-release; echo "$VERSION_CODENAME")): all checks passed"
' deb-release "$deb" "$version"
