#!/usr/bin/env bash
# scripts/dev-cluster as a person drives it (the interface issue 14 names): two nodes with
# accounting, a failed job whose triage summary reaches sacct, a kernel line put into one node's
# agent with `dev-cluster kernel` that makes that node drain-recommended, and `down`, after which
# nothing it started is left running. Needs root, mariadb and slurmdbd (exit 77: skipped).
#   tests/e2e/dev_cluster_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$(cd "$2" && pwd)
[[ $(id -u) -eq 0 ]] || { echo "dev_cluster_test: needs root; skipped"; exit 77; }
for d in /usr/sbin/mariadbd /usr/sbin/slurmdbd; do
  [[ -x $d ]] || { echo "dev_cluster_test: no $d (scripts/install-deps); skipped"; exit 77; }
done

test_name=dev_cluster_test
# shellcheck source=tests/e2e/dev_cluster_test_lib.sh
source "$src/tests/e2e/dev_cluster_test_lib.sh"
export TRIAGE_DEV_PORTS="$(free_port) $(free_port 2) $(free_port 2)"
export TRIAGE_DEV_DB_PORTS="$(free_port) $(free_port)"

dev up --nodes 2 --accounting --plugin-args 'requeue=allow' || fail "up failed"
mapfile -t nodes < <(sed -n 's/^NodeName=\([^ ]*\) .*/\1/p' "$state/etc/slurm.conf")
((${#nodes[@]} == 2)) || fail "expected 2 nodes, slurm.conf has: ${nodes[*]}"
export SLURM_CONF=$state/etc/slurm.conf

# Two nodes or more: Slurm knows two leaf switches, one node each here (issue 27, part 6).
topology=$(scontrol show topology 2>&1) || fail "scontrol show topology: $topology"
[[ $topology == *"SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=${nodes[0]}"* &&
   $topology == *"SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=${nodes[1]}"* ]] ||
  fail "expected leaf1 with ${nodes[0]} and leaf2 with ${nodes[1]}: $topology"

# A job that fails on the first node: its analysis ends with the summary in its accounting record.
home=$state/home/triage-test
job=$(cd "$home" && runuser -u triage-test -- sbatch --parsable --triage=basic -w "${nodes[0]}" \
  -o "$home/slurm-%j.out" --wrap 'echo "Traceback (most recent call last):"; echo "  File \"train.py\", line 3, in <module>"; echo "ValueError: bad"; exit 3')
summary() { sacct -n -X -P -j "$job" -o AdminComment 2>/dev/null | grep -q "triage="; }
wait_for 90 "triage summary in sacct for job $job" summary
comment=$(sacct -n -X -P -j "$job" -o AdminComment)
[[ $comment == *"triage=python-exception;blame=user-code;"* ]] ||
  fail "job $job's summary is not its ValueError's: $comment"

# A kernel line into the second node's agent: it alone becomes drain-recommended.
dev kernel "${nodes[1]}" 'NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.'
verdict() {
  "$build/slurm-triage" nodes --socket "$state/triage/$1/run/agent.sock" --format json 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["nodes"][0]["verdict"]["verdict"])'
}
drained() { [[ $(verdict "${nodes[1]}") == drain-recommended ]]; }
wait_for 30 "drain recommendation for ${nodes[1]} after its Xid 79" drained
[[ $(verdict "${nodes[0]}") != drain-recommended ]] || fail "${nodes[0]} drain-recommended too"
dev kernel nosuchnode 'x' 2>/dev/null && fail "a kernel line for an unknown node was accepted"

# down stops everything up started.
dev down >/dev/null
sleep 1
left=$(pgrep -f -- "$state" || true)
[[ -z $left ]] || fail "still running after down: $(ps -o pid=,args= -p "${left//$'\n'/,}")"
echo "dev_cluster_test: ok (job $job summarised in sacct; ${nodes[1]} drain-recommended)"
