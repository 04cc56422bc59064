// Whole-block byte routines the log scanner runs over every byte of a log, so they must run at
// memory speed: newline counting and in-place removal of ANSI escape sequences.
#pragma once

#include <array>
#include <cstddef>

namespace triage {

// Number of '\n' bytes in [p, p + n).
size_t count_newlines(const char* p, size_t n);

// Removes ANSI escape sequences (CSI, OSC, two-byte escapes) from [p, p + n) in place, moving the
// remaining bytes down. Never crosses a '\n' (a broken escape ends at the line break). Returns the
// new length.
size_t strip_ansi_in_place(char* p, size_t n);

// ASCII lower-casing table (other bytes map to themselves).
extern const std::array<unsigned char, 256> kLowerAscii;

}  // namespace triage
