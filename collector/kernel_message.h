// Small facts about a kernel message that do not need a rule: the device a driver printed in
// front of it, a canonical spelling of PCI addresses, and the shape used to recognise floods.
#pragma once

#include <string>
#include <string_view>

namespace triage::collector {

// The PCI address of dev_printk's "<driver> <address>[ <ifname>]: " prefix ("amdgpu
// 0000:c1:00.0: amdgpu: ..."), or "" when the message does not start that way.
std::string_view prefix_device(std::string_view message);

// Lowercases PCI addresses and completes NVIDIA's function-less form ("0000:3B:00" ->
// "0000:3b:00.0"); other device names (interfaces) are returned as they are.
std::string canonical_device(std::string_view device);

// Appends the message with every word that contains a digit replaced by '#', so that lines
// differing only in numbers, addresses and counters compare equal ("soft lockup - CPU#12 stuck for
// 22s!" and "... CPU#3 stuck for 48s!").
void append_flood_shape(std::string& out, std::string_view message);

}  // namespace triage::collector
