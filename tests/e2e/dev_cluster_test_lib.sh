# shellcheck shell=bash disable=SC2154  # src, build and test_name: set by the sourcing test
# Sourced by the shell e2e tests that drive scripts/dev-cluster (dev_cluster_test.sh,
# preflight_test.sh, reboot_e2e_test.sh): a private state directory, `dev` for the script, the
# cluster taken down and the directory removed on exit, `fail` with the daemons' log tails, and
# `wait_for`. Set before sourcing:
#   src, build       the source and build directories
#   test_name        names the test in messages and its state directory
# Optional:
#   fail_log_globs   which logs under $state/log `fail` shows (default: all)
#   fail_log_lines   how many of their last lines (default 20)
#   wait_poll        seconds between wait_for's tries (default 1)
# and a function `fail_context`, whose output `fail` prints before the logs.

: "${src:?}" "${build:?}" "${test_name:?}"

# A loopback port nobody listens on now.
# free_port [N]: a port P that N nodes can share (N defaults to 1): P .. P+N-1 free on 127.0.0.1
# and P free on 127.0.0.1 .. 127.0.0.N. scripts/slurm-cluster gives node i the slurmd port P+i-1
# and the agent address 127.0.0.i with port P, so a base free on 127.0.0.1 alone is not enough
# (another program on P+1 kept vm2's slurmd from starting; one on 127.0.0.2:P, vm2's agent).
free_port() {
  python3 - "${1:-1}" <<'PY'
import socket, sys
n = int(sys.argv[1])
for _ in range(200):
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    base = probe.getsockname()[1]
    held = [probe]
    try:
        for k in range(1, n):
            for addr in (("127.0.0.1", base + k), ("127.0.0.%d" % (k + 1), base)):
                s = socket.socket()
                held.append(s)
                s.bind(addr)
        print(base)
        sys.exit(0)
    except OSError:
        pass
    finally:
        for s in held:
            s.close()
sys.exit("free_port: no port for %d nodes" % n)
PY
}

state=$(mktemp -d "/var/tmp/triage-$test_name.XXXXXX")
export TRIAGE_DEV_STATE=$state TRIAGE_BUILD_DIR=$build
dev() { "$src/scripts/dev-cluster" "$@"; }
cleanup() {
  dev down >/dev/null 2>&1 || true
  rm -rf "$state"
}
trap cleanup EXIT

fail() {
  echo "$test_name: $*" >&2
  if declare -F fail_context >/dev/null; then fail_context >&2 || true; fi
  local g f pats
  read -ra pats <<<"${fail_log_globs:-*}"  # split, not globbed here: under $state/log below
  for g in "${pats[@]}"; do
    for f in "$state"/log/$g; do
      [[ -f $f ]] && { echo "--- $f"; tail -n "${fail_log_lines:-20}" "$f"; } >&2
    done
  done
  exit 1
}

# wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds, or fail naming WHAT.
wait_for() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    ((SECONDS < deadline)) || fail "no $what within the time allowed"
    sleep "${wait_poll:-1}"
  done
}
