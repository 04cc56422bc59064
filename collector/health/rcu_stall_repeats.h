// Which RCU CPU stall reports are the kernel repeating its warning about a grace period that is
// still stalled, rather than a first warning.
//
// The kernel warns about a stalled grace period once it has lasted the stall timeout
// (CONFIG_RCU_CPU_STALL_TIMEOUT, rcupdate.rcu_cpu_stall_timeout), and while that same grace period
// goes on, again every three timeouts and three jiffies (kernel/rcu/tree_stall.h: print_cpu_stall()
// and print_other_cpu_stall() set `jiffies_stall = jiffies + 3 * rcu_jiffies_till_stall_check() +
// 3`). A report's `t=` is the jiffies since its grace period began: about one timeout in a first
// warning, four, seven, ... in the repeats. Documentation/RCU/stallwarn.rst calls such a series
// "a series of stall warnings from a single extended stall", and says of a grace period that cannot
// end that it "will eventually cause the system to run out of memory and hang" (the kernel's own
// words when the grace-period kthread starves: "OOM is now expected behavior").
#pragma once

#include <cstdint>
#include <vector>

#include "common/model.h"

namespace triage::collector {

// A first warning comes at one stall timeout, the earliest repeat at four: twice the shortest `t=`
// of a flavor separates the two with a whole timeout of margin on either side.
inline constexpr uint64_t kRcuStallRepeatFactor = 2;

// The reports among `stalls` (rcu-stall events of one boot, fields `flavor` and `jiffies`) whose
// `t=` is at least kRcuStallRepeatFactor times the shortest `t=` of their flavor: repeated
// warnings, each showing a grace period still stalled for several timeouts. Reports without `t=`,
// and those the kernel itself marks "(false positive?)" (the CPU was idle), count for nothing.
std::vector<const KernelEvent*> repeated_rcu_stalls(const std::vector<const KernelEvent*>& stalls);

}  // namespace triage::collector
