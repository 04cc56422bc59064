#include "analyzer/byte_scan.h"

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>

namespace triage {

namespace {
constexpr std::array<unsigned char, 256> make_lower_table() {
  std::array<unsigned char, 256> t{};
  for (size_t i = 0; i < t.size(); ++i) {
    t[i] = static_cast<unsigned char>((i >= 'A' && i <= 'Z') ? i + 32 : i);
  }
  return t;
}
}  // namespace

const std::array<unsigned char, 256> kLowerAscii = make_lower_table();

namespace {

// 16 bytes as a GNU vector (GCC and Clang): compiles to SSE2/NEON compares without intrinsics.
using Bytes16 = signed char __attribute__((vector_size(16)));
inline Bytes16 load16(const char* p) {
  Bytes16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The lane counters are unsigned: a compare's -1 seen as 255, subtracted, wraps to +1 (defined),
// where signed lanes would overflow (undefined) past 127 newlines.
using Counts16 = unsigned char __attribute__((vector_size(16)));

inline Counts16 newline_mask(const char* p, const Bytes16& nl) {
  const Bytes16 eq = load16(p) == nl;
  return std::bit_cast<Counts16>(eq);
}

}  // namespace

size_t count_newlines(const char* p, size_t n) {
  size_t count = 0;
  size_t i = 0;
  // Byte-wise counters: a compare yields -1 per newline, subtracted into 16 lanes; at most 252
  // subtractions before the lanes are summed, so that no lane overflows.
  const Bytes16 nl = {'\n', '\n', '\n', '\n', '\n', '\n', '\n', '\n',
                      '\n', '\n', '\n', '\n', '\n', '\n', '\n', '\n'};
  while (i + 64 <= n) {
    Counts16 acc = {};
    for (size_t rounds = 0; i + 64 <= n && rounds < 63; ++rounds, i += 64) {
      acc -= newline_mask(p + i, nl);
      acc -= newline_mask(p + i + 16, nl);
      acc -= newline_mask(p + i + 32, nl);
      acc -= newline_mask(p + i + 48, nl);
    }
    for (size_t k = 0; k < 16; ++k)
      count += acc[k];
  }
  // The rest eight bytes at a time (the scanner counts many short gaps between candidate lines):
  // a byte of x ^ "\n\n..." is zero exactly at a newline; the exact zero-byte test leaves 1 in
  // that byte, and a multiply sums the bytes into the top one (no popcount instruction in the
  // baseline x86-64 the package targets).
  constexpr uint64_t kLow7 = 0x7f7f7f7f7f7f7f7fu;
  constexpr uint64_t kOnes = 0x0101010101010101u;
  for (; i + 8 <= n; i += 8) {
    uint64_t x = 0;
    std::memcpy(&x, p + i, sizeof x);
    x ^= 0x0a0a0a0a0a0a0a0au;
    const uint64_t zero = ~(((x & kLow7) + kLow7) | x | kLow7) >> 7;
    count += static_cast<size_t>((zero * kOnes) >> 56);
  }
  for (; i < n; ++i)
    count += p[i] == '\n' ? 1u : 0u;
  return count;
}

size_t strip_ansi_in_place(char* p, size_t n) {
  const void* first = std::memchr(p, '\x1b', n);
  if (first == nullptr) return n;
  size_t w = static_cast<size_t>(static_cast<const char*>(first) - p);
  size_t r = w;
  while (r < n) {
    const char c = p[r];
    if (c != '\x1b') {
      p[w++] = c;
      ++r;
      continue;
    }
    if (r + 1 >= n) {
      ++r;  // a lone trailing ESC carries nothing
      continue;
    }
    const char kind = p[r + 1];
    if (kind == '[') {
      size_t j = r + 2;
      while (j < n && p[j] != '\n' && !(p[j] >= 0x40 && p[j] <= 0x7E))
        ++j;
      r = (j < n && p[j] != '\n') ? j + 1 : j;
    } else if (kind == ']') {
      size_t j = r + 2;
      while (j < n && p[j] != '\n' && p[j] != '\x07' &&
             !(p[j] == '\x1b' && j + 1 < n && p[j + 1] == '\\'))
        ++j;
      if (j < n && p[j] == '\x07') {
        r = j + 1;
      } else if (j < n && p[j] == '\x1b') {
        r = j + 2;
      } else {
        r = j;
      }
    } else if (kind == '\n') {
      ++r;
    } else if (std::strchr("()*+-./", kind) != nullptr && r + 2 < n && p[r + 2] != '\n') {
      r += 3;  // character set designation: ESC ( B
    } else {
      r += 2;
    }
  }
  return w;
}

}  // namespace triage
