#!/usr/bin/env bash
# The preflight's node facts on a real two-node Slurm (scripts/dev-cluster up --plugin-args
# 'preflight=on'), each refusing the first node so that the job runs on the second (issue 27):
#   1. a process of a job that ended on the first node still holds its GPU (scripts/dev-cluster
#      leftover: a process in the job's cgroup holding the node's fake /dev/nvidia0): the node is
#      drained with a reason naming the process, its job and the device;
#   2. a network port of the first node is down (scripts/dev-cluster ib ... state DOWN): drained
#      "triage preflight: port down: mlx5_0/1".
# Needs root (exit 77: skipped).
#   tests/e2e/preflight_evidence_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$(cd "$2" && pwd)
[[ $(id -u) -eq 0 ]] || { echo "preflight_evidence_test: needs root; skipped"; exit 77; }
started=$SECONDS

test_name=preflight_evidence_test fail_log_lines=30
# shellcheck source=tests/e2e/dev_cluster_test_lib.sh
source "$src/tests/e2e/dev_cluster_test_lib.sh"
agent_port=$(free_port 2)
TRIAGE_DEV_PORTS="$(free_port) $(free_port 2) $agent_port"
# Short periods so that the test waits seconds, not the defaults' half minutes.
TRIAGE_DEV_AGENT_SET="LeftoverGrace=2s GpuHolderScanInterval=1s SysfsSampleInterval=1s"
export TRIAGE_DEV_PORTS TRIAGE_DEV_AGENT_SET

dev up --nodes 2 --plugin-args 'preflight=on' || fail "up failed"
mapfile -t nodes < <(sed -n 's/^NodeName=\([^ ]*\) .*/\1/p' "$state/etc/slurm.conf")
((${#nodes[@]} == 2)) || fail "expected 2 nodes, slurm.conf has: ${nodes[*]}"
export SLURM_CONF=$state/etc/slurm.conf
home=$state/home/triage-test
bad=${nodes[0]} good=${nodes[1]}

field() { scontrol show "$1" "$2" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$3=//p" | head -n1; }
node_reason() { scontrol show node "$1" 2>/dev/null | sed -n 's/^ *Reason=\(.*\) \[.*$/\1/p'; }
submit() { (cd "$home" && runuser -u triage-test -- sbatch --parsable -o "$home/slurm-%j.out" "$@"); }
completed() { [[ $(field job "$1" JobState) == COMPLETED ]]; }

# Submits a one-node job (Slurm gives an idle partition's one-node job to its first node), and
# checks that the first node refused it with a reason matching $1 and that it ran on the second.
moved() {
  local pattern=$1 job
  job=$(submit -N1 --wrap hostname)
  refused() { [[ $(node_reason "$bad") == "triage preflight: "* ]]; }
  wait_for 30 "preflight drain of $bad (job $job)" refused
  reason=$(node_reason "$bad")
  # shellcheck disable=SC2053  # a glob pattern on purpose
  [[ $reason == $pattern ]] || fail "$bad's reason does not match '$pattern': $reason"
  requeued() { [[ $(field job "$job" Restarts) == 1 && $(field job "$job" JobState) == PENDING ]]; }
  wait_for 30 "job $job requeued" requeued
  # Held back for the credential's lifetime after a requeue (preflight_test.sh says why): now.
  scontrol update jobid="$job" StartTime=now
  wait_for 60 "job $job completed" completed "$job"
  [[ $(field job "$job" NodeList) == "$good" ]] || fail "job $job ran on $(field job "$job" NodeList), not $good"
}

# 1. A process of an ended job holding the first node's GPU.
job0=$(submit -w "$bad" --wrap hostname)
wait_for 60 "job $job0 completed on $bad" completed "$job0"
out=$(dev leftover "$bad" "$job0" nvidia0) || fail "leftover failed: $out"
pid=$(sed -n 's/^dev-cluster: pid \([0-9]*\) .*/\1/p' <<<"$out")
[[ -n $pid ]] || fail "leftover said: $out"
seen() { grep -q "pid $pid (sleep) of job $job0, which is not running here, holds /dev/nvidia0" "$state/log/agent-$bad.out"; }
wait_for 15 "$bad's agent finding pid $pid holding its GPU" seen
sleep 2  # LeftoverGrace after the job's end
moved "*pid $pid (sleep) of ended job $job0 holds /dev/nvidia0*"
leftover_reason=$reason
kill "$pid"

# 2. A port of the first node down.
dev ib "$bad" mlx5_0 1 state DOWN
port_down() { curl -s "http://127.0.0.1:$agent_port/metrics" | grep -q '^triage_ib_port_up{.*device="mlx5_0".*} 0$'; }
wait_for 15 "$bad's agent reading mlx5_0/1 down" port_down
scontrol update nodename="$bad" state=resume
# Slurm marks a node whose prolog failed not responding until slurmd next answers; only an idle,
# responding node takes the next job.
idle() { [[ $(sinfo -h -n "$bad" -o %t) == idle ]]; }
wait_for 30 "$bad idle again" idle
moved "*port down: mlx5_0/1*"

echo "preflight_evidence_test: ok in $((SECONDS - started)) s ($bad refused: $leftover_reason; then: $reason)"
