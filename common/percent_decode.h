// Reading "%XX" escapes: the one way to, for the HTTP query parser, the AdminComment's segments
// and the kernel's "\xXX" escapes in /dev/kmsg records.
#pragma once

#include <string>
#include <string_view>

namespace triage {

// The value of one hexadecimal digit ('0'-'9', 'a'-'f', 'A'-'F'), or -1.
int hex_digit_value(char c);

// `s` with every "%XX" (two hex digits) replaced by the byte it names; a "%" without two hex
// digits after it stays as it is. With plus_is_space, "+" becomes " " too (a URL query's form
// encoding).
std::string percent_decode(std::string_view s, bool plus_is_space = false);

}  // namespace triage
