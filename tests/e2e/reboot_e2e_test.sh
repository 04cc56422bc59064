#!/usr/bin/env bash
# Reboot and return, and the partition limit (issue 27), on scripts/dev-cluster with four nodes,
# Remediate=reboot and MaxTriageDrainFraction=0.5:
#   1. an Xid 79 on node 1 takes it through `scontrol reboot ASAP nextstate=DOWN`, the dev
#      cluster's RebootProgram (a new boot id), DOWN, a clean first health pass, and IDLE again;
#   2. an Xid 79 on node 2 that is back after its reboot leaves it DOWN with "needs hands", and it
#      is not rebooted a second time;
#   3. with node 2 down and an Xid 48 draining node 3, the partition has 2 of 4 nodes out by triage:
#      node 4's Xid 48 is held back (recommendation only, a log line and triage_remediation_limited).
# Needs root (exit 77: skipped).
#   tests/e2e/reboot_e2e_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$(cd "$2" && pwd)
[[ $(id -u) -eq 0 ]] || { echo "reboot_e2e_test: needs root; skipped"; exit 77; }

test_name=reboot_e2e_test wait_poll=0.5 fail_log_lines=15
fail_log_globs="slurmctld.log agent*.out reboot*.out"
fail_context() { sinfo -N -o '%N %T %E'; }
# shellcheck source=tests/e2e/dev_cluster_test_lib.sh
source "$src/tests/e2e/dev_cluster_test_lib.sh"
agent_port=$(free_port 4)
export TRIAGE_DEV_PORTS="$(free_port) $(free_port 4) $agent_port"
export TRIAGE_DEV_AGENT_SET="DrainPolicy=auto Remediate=reboot MaxTriageDrainFraction=0.5"
state_of() { sinfo -h -N -n "$1" -o '%T' | head -n 1; }
reason_of() { sinfo -h -N -n "$1" -o '%E' | head -n 1; }
is_state() { [[ $(state_of "$1") == "$2" ]]; }
reason_has() { [[ $(reason_of "$1") == *"$2"* ]]; }

started=$SECONDS
dev up --nodes 4 >/dev/null || fail "up --nodes 4 failed"
mapfile -t nodes < <(sed -n 's/^NodeName=\([^ ]*\) .*/\1/p' "$state/etc/slurm.conf")
((${#nodes[@]} == 4)) || fail "expected 4 nodes, slurm.conf has: ${nodes[*]}"
export SLURM_CONF=$state/etc/slurm.conf
echo "reboot_e2e_test: 4 nodes up in $((SECONDS - started)) s"
xid79='NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.'
xid48='NVRM: Xid (PCI:0000:3b:00): 48, pid=1234, An uncorrectable double bit error'

# 1. Reboot, DOWN, a clean pass, IDLE.
n1=${nodes[0]}
boot_before=$(cat "$state/boot_id-$n1")
t=$SECONDS
dev kernel "$n1" "$xid79"
wait_for 30 "reboot asked for $n1" reason_has "$n1" "triage: reboot: "
wait_for 90 "new boot id on $n1" bash -c "[[ \$(cat '$state/boot_id-$n1') != '$boot_before' ]]"
# Slurm 23.11 and later keep a resumed node's reason when the cluster has no accounting storage, as
# the dev cluster here (docs/slurm-versions.md: clusteracct_storage_g_node_up() in
# src/interfaces/accounting_storage.c returns before clearing it); the next job clears it.
slurm_version=$(sinfo --version | awk '{print $NF}')
kept_reason() {
  [[ $(printf '%s\n' "$slurm_version" 23.11 | sort -V | head -n 1) == 23.11 ]] &&
    reason_has "$n1" "triage: reboot: " && [[ $(reason_of "$n1") == *" : reboot complete" ]]
}
back_idle() { is_state "$n1" idle && { [[ $(reason_of "$n1") == none ]] || kept_reason; }; }
wait_for 90 "$n1 back to idle after a clean health pass" back_idle
# The agent logs the resume once scontrol has returned, which can be after sinfo shows it.
resume_logged() {
  grep -q "resume done" "$state/log/agent-$n1.out" ||
    grep -q "after the reboot, resume of $n1 done" "$state/log/agent-$n1.out"
}
wait_for 10 "$n1's agent logging the resume" resume_logged
echo "reboot_e2e_test: $n1 rebooted and resumed in $((SECONDS - t)) s"

# 2. The fault back on the new boot: DOWN, needs hands, no second reboot.
n2=${nodes[1]}
t=$SECONDS
dev kernel-on-boot "$n2" "$xid79"
dev kernel "$n2" "$xid79"
wait_for 120 "$n2 down with needs hands" reason_has "$n2" "triage: needs hands: "
[[ $(state_of "$n2") == down* ]] || fail "$n2 is $(state_of "$n2"), not down"
grep -q "needs hands" "$state/log/agent-$n2.out" || fail "$n2's agent did not log needs hands"
sleep 3
[[ $(grep -c "rebooting $n2" "$state/log/reboot-$n2.out") == 1 ]] || fail "$n2 rebooted twice"
reason_has "$n2" "triage: needs hands: " || fail "$n2's reason changed: $(reason_of "$n2")"
echo "reboot_e2e_test: $n2 left down with needs hands in $((SECONDS - t)) s"

# 3. The limit: n2 (down) and n3 (drained) are 2 of 4; n4 is held back.
n3=${nodes[2]} n4=${nodes[3]}
t=$SECONDS
dev kernel "$n3" "$xid48"
wait_for 30 "$n3 drained by triage" reason_has "$n3" "triage: "
dev kernel "$n4" "$xid48"
limited() { grep -q "triage limit: drain of $n4 held back" "$state/log/agent-$n4.out"; }
wait_for 30 "the limit's log line on $n4" limited
metric=$(curl -s "http://127.0.0.4:$agent_port/metrics" | grep '^triage_remediation_limited{' || true)
[[ $metric == *" 1" ]] || fail "triage_remediation_limited on $n4: '$metric'"
is_state "$n4" idle || fail "$n4 is $(state_of "$n4") despite the limit"
echo "reboot_e2e_test: the limit held $n4 back in $((SECONDS - t)) s"
echo "reboot_e2e_test: ok in $((SECONDS - started)) s"
