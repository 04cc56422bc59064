#!/usr/bin/env bash
# The preflight on a real two-node Slurm (scripts/dev-cluster up --plugin-args 'preflight=on'):
# a kernel line makes the first node drain-recommended; a job that would land there is refused by
# its prolog, the node is drained with a "triage preflight:" reason naming the evidence, and the
# job runs on the other node, its AdminComment naming the refusal and its report saying it was
# moved off the first node and why. Then, with the first node resumed and its agent stopped, a job
# runs there: no agent, no failed prolog. Needs root (exit 77: skipped).
#   tests/e2e/preflight_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$(cd "$2" && pwd)
[[ $(id -u) -eq 0 ]] || { echo "preflight_test: needs root; skipped"; exit 77; }
started=$SECONDS

test_name=preflight_test fail_log_lines=30
# shellcheck source=tests/e2e/dev_cluster_test_lib.sh
source "$src/tests/e2e/dev_cluster_test_lib.sh"
TRIAGE_DEV_PORTS="$(free_port) $(free_port 2) $(free_port 2)"
export TRIAGE_DEV_PORTS

dev up --nodes 2 --plugin-args 'preflight=on' || fail "up failed"
mapfile -t nodes < <(sed -n 's/^NodeName=\([^ ]*\) .*/\1/p' "$state/etc/slurm.conf")
((${#nodes[@]} == 2)) || fail "expected 2 nodes, slurm.conf has: ${nodes[*]}"
grep -q 'nohold_on_prolog_fail' "$state/etc/slurm.conf" || fail "slurm.conf lacks nohold_on_prolog_fail"
grep -q '^required .*preflight=on' "$state/etc/plugstack.conf" || fail "plugstack.conf: $(cat "$state/etc/plugstack.conf")"
export SLURM_CONF=$state/etc/slurm.conf
home=$state/home/triage-test
bad=${nodes[0]} good=${nodes[1]}

verdict() {
  "$build/slurm-triage" nodes --socket "$state/triage/$1/run/agent.sock" --format json 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["nodes"][0]["verdict"]["verdict"])'
}
dev kernel "$bad" 'NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.'
recommended() { [[ $(verdict "$bad") == drain-recommended ]]; }
wait_for 30 "drain recommendation for $bad after its Xid 79" recommended

# Slurm gives an idle two-node partition's one-node job to the first node: the refused one.
job=$(cd "$home" && runuser -u triage-test -- sbatch --parsable -N1 -o "$home/slurm-%j.out" \
  --wrap 'hostname')
field() { scontrol show "$1" "$2" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$3=//p" | head -n1; }
node_reason() { scontrol show node "$1" 2>/dev/null | sed -n 's/^ *Reason=\(.*\) \[.*$/\1/p'; }
refused() { [[ $(node_reason "$bad") == "triage preflight: "* ]]; }
wait_for 30 "preflight drain of $bad" refused
reason=$(node_reason "$bad")
[[ $reason == *"drain recommended: "*"Xid 79"* ]] || fail "$bad's reason does not name the Xid 79: $reason"
# Slurm holds a requeued job back for its credential's lifetime (AuthInfo cred_expire + 1 s, 121 s
# by default: job_mgr.c _job_requeue_op); the test lets it start at once, as an admin may.
requeued() { [[ $(field job "$job" Restarts) == 1 && $(field job "$job" JobState) == PENDING ]]; }
wait_for 30 "job $job requeued" requeued
[[ $(field job "$job" Reason) != JobHeld* ]] || fail "job $job was held: $(field job "$job" Reason)"
scontrol update jobid="$job" StartTime=now
done_() { [[ $(field job "$job" JobState) == COMPLETED ]]; }
wait_for 60 "job $job completed" done_
[[ $(field job "$job" NodeList) == "$good" ]] || fail "job $job ran on $(field job "$job" NodeList), not $good"
[[ $(field job "$job" Restarts) == 1 ]] || fail "job $job was not requeued once: $(scontrol show job "$job")"
[[ $(node_reason "$good") == "" ]] || fail "$good has a reason: $(node_reason "$good")"
# The job itself says where it was refused and why (AdminComment: only root and operators write it).
comment=$(field job "$job" AdminComment)
[[ $comment == *"triage-refused=$bad:triage%20preflight:%20drain%20recommended:"* ]] ||
  fail "job $job's AdminComment does not name the refusal: $comment"

# The moved job's report says so among its first lines, and triage.json carries it (issue 27:
# the job-end pipeline on $good reads the refusal back from AdminComment).
report=$home/triage-$job
reported() { [[ -s $report.md && -s $report.json ]]; }
wait_for 60 "report of job $job ($report.md)" reported
head -n 8 "$report.md" |
  grep -qF "**Moved:** off node \` $bad \` before it started: triage preflight: drain recommended: " ||
  fail "job $job's triage.md does not say it was moved off $bad: $(head -n 8 "$report.md")"
python3 - "$report.json" "$bad" <<'PY' || fail "job $job's triage.json does not carry the move: $(cat "$report.json")"
import json, sys
moved = json.load(open(sys.argv[1])).get("moved") or []
assert len(moved) == 1, moved
assert moved[0]["node"] == sys.argv[2], moved
assert moved[0]["reason"].startswith("triage preflight: drain recommended: "), moved
assert "Xid 79" in moved[0]["reason"], moved
PY

# The agent of the first node stopped: its prolog cannot ask, and lets the job in.
scontrol update nodename="$bad" state=resume
kill "$(cat "$state/pids/agent-$bad")"
job2=$(cd "$home" && runuser -u triage-test -- sbatch --parsable -w "$bad" -o "$home/slurm-%j.out" \
  --wrap 'hostname')
done2() { [[ $(field job "$job2" JobState) == COMPLETED ]]; }
wait_for 60 "job $job2 completed on $bad with its agent stopped" done2
[[ $(field job "$job2" Restarts) == 0 ]] || fail "job $job2 was requeued with the agent stopped"
[[ $(node_reason "$bad") == "" ]] || fail "$bad drained with its agent stopped: $(node_reason "$bad")"
grep -q "preflight for job $job2: no answer from the agent" "$state"/log/slurmd*"$bad"* ||
  fail "slurmd's log does not say job $job2 went ahead unchecked"

echo "preflight_test: ok in $((SECONDS - started)) s ($bad refused job $job: $reason; it ran on $good)"
