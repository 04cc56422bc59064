#!/usr/bin/env bash
# The demo as a person runs it (scripts/demo-cluster on a throwaway single-node Slurm): each of
# the five example jobs is reported as what it is. hang-cancel is the one that needs judgement: it
# stops stepping with every rank alive and is scancelled, so its report must say "cancelled" with
# the hang as its primary failure, from its own step timestamps (two task labels deep).
#   tests/e2e/demo_verdicts_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$(cd "$2" && pwd)
[[ $(id -u) -eq 0 ]] || { echo "demo_verdicts_test: needs root; skipped"; exit 77; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
state=$(mktemp -d /var/tmp/triage-demo-test.XXXXXX)
out=$state.out
export TRIAGE_DEV_STATE=$state TRIAGE_BUILD_DIR=$build
export TRIAGE_DEV_PORTS="$(free_port) $(free_port) $(free_port)"
cleanup() {
  "$src/scripts/dev-cluster" down >/dev/null 2>&1 || true
  rm -rf "$state" "$out"
}
trap cleanup EXIT

# demo-cluster stops its cluster when it ends; its table is what a person reads.
if ! "$src/scripts/demo-cluster" >"$out" 2>&1; then
  cat "$out" >&2
  echo "demo_verdicts_test: scripts/demo-cluster failed" >&2
  exit 1
fi
failed=0
expect() {  # expect JOB SLURM_STATE 'STATUS / PRIMARY'
  local line
  line=$(grep -E "^  $1 +job [0-9]+ +[A-Z]" "$out" | tail -n 1 || true)
  if [[ $line =~ ^\ \ $1\ +job\ [0-9]+\ +$2\ +$3\ + ]]; then
    echo "ok: $1 is $2, $3"
  else
    echo "demo_verdicts_test: $1 should be $2, '$3'; the demo printed: ${line:-nothing}" >&2
    failed=1
  fi
}
expect clean-finish COMPLETED 'completed / -'
expect nccl-timeout FAILED 'failed / nccl-timeout'
expect host-oom FAILED 'failed / oom-host'
expect hang-cancel CANCELLED 'cancelled / hang'
expect node-exit-137 FAILED 'failed / signal-kill'
if ((failed)); then
  sed -n '/== the reports/,$p' "$out" >&2
  for f in "$state"/log/*; do [[ -f $f ]] && { echo "--- $f"; tail -n 20 "$f"; } >&2; done
  exit 1
fi
