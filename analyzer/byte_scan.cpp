#include "analyzer/byte_scan.h"

#include <array>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

size_t count_newlines(const char* p, size_t n) {
  size_t count = 0;
  size_t i = 0;
#if defined(__SSE2__)
  // Byte-wise counters: each compare yields 0xFF (= -1) per newline, subtracted into 16 lanes; at
  // most 255 rounds before the lanes are summed with SAD so that no lane overflows.
  const __m128i nl = _mm_set1_epi8('\n');
  const __m128i zero = _mm_setzero_si128();
  while (i + 16 <= n) {
    __m128i acc = _mm_setzero_si128();
    size_t rounds = 0;
    while (i + 64 <= n && rounds < 63) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 32));
      const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 48));
      acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(a, nl));
      acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(b, nl));
      acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(c, nl));
      acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(d, nl));
      i += 64;
      ++rounds;
    }
    if (rounds == 0) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
      acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(a, nl));
      i += 16;
    }
    const __m128i sums = _mm_sad_epu8(acc, zero);
    count += static_cast<size_t>(_mm_cvtsi128_si32(sums)) +
             static_cast<size_t>(_mm_cvtsi128_si32(_mm_unpackhi_epi64(sums, sums)));
  }
#endif
  for (; i < n; ++i)
    count += p[i] == '\n' ? 1 : 0;
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
