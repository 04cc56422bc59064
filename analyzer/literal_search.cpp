#include "analyzer/literal_search.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "analyzer/byte_scan.h"

namespace triage {

namespace {

constexpr unsigned kHashBits = 16;
constexpr size_t kBuckets = size_t{1} << kHashBits;
// The probe table's slots: the top kSlotBits of a hash value.
constexpr unsigned kSlotBits = 12;
constexpr unsigned kSlotShift = kHashBits - kSlotBits;
constexpr size_t kSlots = size_t{1} << kSlotBits;
constexpr uint32_t kFold = 0x20202020u;  // sets bit 5 of every byte: 'A'..'Z' become 'a'..'z'
constexpr size_t kGram = 4;

inline uint32_t load_gram(const char* p) {
  uint32_t x = 0;
  std::memcpy(&x, p, sizeof x);
  return x | kFold;
}

// Eight bytes with 'A'..'Z' lowered, as kLowerAscii does byte by byte (SWAR: a byte's high bit
// says it is upper-case; bit 7 moved to bit 5 is the 0x20 that lowers it).
inline uint64_t lower8(uint64_t x) {
  constexpr uint64_t kOnes = 0x0101010101010101u;
  constexpr uint64_t kHigh = 0x8080808080808080u;
  const uint64_t low7 = x & ~kHigh;
  const uint64_t ge_a = low7 + uint64_t{0x80 - 'A'} * kOnes;  // high bit: byte >= 'A' (bit 7 aside)
  const uint64_t gt_z = low7 + uint64_t{0x7f - 'Z'} * kOnes;  // high bit: byte > 'Z'
  const uint64_t upper = ge_a & ~gt_z & ~x & kHigh;           // ... and bit 7 clear
  return x | (upper >> 2);
}

inline uint64_t load8(const char* p) {
  uint64_t x = 0;
  std::memcpy(&x, p, sizeof x);
  return x;
}

// Does text[0, n) lowered equal `lit` (lower-case already)? Eight bytes at a time, the last eight
// overlapping when n is not a multiple of eight; n >= 8.
inline bool equals_lowered(const char* text, const char* lit, size_t n) {
  for (size_t k = 0; k + 8 < n; k += 8) {
    if (lower8(load8(text + k)) != load8(lit + k)) return false;
  }
  return lower8(load8(text + n - 8)) == load8(lit + n - 8);
}

inline uint32_t hash_gram(uint32_t folded) {
  return (folded * 2654435761u) >> (32 - kHashBits);
}

// Sampling stops this far into a calibration sample: enough text to see the log's common words.
constexpr size_t kCalibrationBytes = size_t{512} * 1024;

}  // namespace

LiteralSearcher::LiteralSearcher(std::vector<std::string> literals)
    : literals_(std::move(literals)) {
  size_t min_len = std::numeric_limits<size_t>::max();
  for (const auto& l : literals_) {
    if (l.size() < kGram) throw std::invalid_argument("literal shorter than 4 bytes: " + l);
    if (l.size() > std::numeric_limits<uint32_t>::max())
      throw std::invalid_argument("literal too long");
    min_len = std::min(min_len, l.size());
    max_length_ = std::max(max_length_, l.size());
  }
  stride_ = literals_.empty() ? 1 : min_len - kGram + 1;
  build(nullptr);
}

void LiteralSearcher::calibrate(std::string_view sample) {
  if (sample.size() < kGram) return;
  const size_t n = std::min(sample.size(), kCalibrationBytes);
  std::vector<uint32_t> counts(kBuckets, 0);
  for (size_t i = 0; i + kGram <= n; ++i) {
    uint32_t& c = counts[hash_gram(load_gram(sample.data() + i))];
    if (c != std::numeric_limits<uint32_t>::max()) ++c;
  }
  build(&counts);
}

void LiteralSearcher::build(const std::vector<uint32_t>* counts) {
  map_.assign(kBuckets, 0);
  text_.clear();
  std::vector<std::pair<uint32_t, Probe>> all;  // (hash, probe)
  for (size_t li = 0; li < literals_.size(); ++li) {
    const std::string& lit = literals_[li];
    const auto text_at = static_cast<uint32_t>(text_.size());
    text_ += lit;
    const size_t grams = lit.size() - kGram + 1;  // >= stride_
    // The window of `stride_` consecutive 4-gram offsets with the smallest total count.
    size_t best = 0;
    uint64_t best_cost = std::numeric_limits<uint64_t>::max();
    for (size_t start = 0; start + stride_ <= grams; ++start) {
      uint64_t cost = 0;
      for (size_t k = 0; k < stride_ && counts != nullptr; ++k) {
        cost += (*counts)[hash_gram(load_gram(lit.data() + start + k))];
      }
      if (cost < best_cost) {
        best_cost = cost;
        best = start;
      }
    }
    for (size_t k = 0; k < stride_; ++k) {
      const uint32_t gram = load_gram(lit.data() + best + k);
      const uint32_t h = hash_gram(gram);
      map_[h] = 1;
      all.emplace_back(h, Probe{gram, static_cast<uint32_t>(li), static_cast<uint32_t>(best + k),
                                static_cast<uint32_t>(lit.size()), text_at});
    }
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  slot_start_.assign(kSlots + 1, 0);
  probes_.clear();
  probes_.reserve(all.size());
  for (const auto& [h, probe] : all) {
    ++slot_start_[(h >> kSlotShift) + 1];
    probes_.push_back(probe);
  }
  for (size_t i = 0; i < kSlots; ++i)
    slot_start_[i + 1] += slot_start_[i];
}

void LiteralSearcher::verify(const char* base, size_t block_len, size_t pos, uint32_t gram,
                             uint32_t h, size_t accept_end, std::vector<LiteralHit>& hits) const {
  const uint32_t slot = h >> kSlotShift;
  for (uint32_t i = slot_start_[slot]; i < slot_start_[slot + 1]; ++i) {
    const Probe& pr = probes_[i];
    if (pr.gram != gram || pr.offset > pos) continue;
    const size_t start = pos - pr.offset;
    if (start >= accept_end || start + pr.length > block_len) continue;
    // Literals that share a common 4-gram (the "error" of Python's exception names) mostly differ
    // in their first one: a cheap test before the whole comparison.
    const char* lit = text_.data() + pr.text;
    if (load_gram(base + start) != load_gram(lit)) continue;
    bool equal = false;
    if (pr.length >= 8) {
      equal = equals_lowered(base + start, lit, pr.length);
    } else {
      const auto* t = reinterpret_cast<const unsigned char*>(base + start);
      size_t k = 0;
      while (k < pr.length && kLowerAscii[t[k]] == static_cast<unsigned char>(lit[k]))
        ++k;
      equal = k == pr.length;
    }
    if (equal) hits.push_back(LiteralHit{start, pr.literal});
  }
}

namespace {

// The sampling loop, with the stride a compile-time constant when it is one of the usual values
// (S > 0) so that the four loads of a round use fixed offsets. A round's four table bytes (0 or 1)
// become four bits, and only the marked samples are looked at again: on a noisy log one round in
// five or six has a mark, and a branch on "any mark" mispredicted there (measured: 3% of the whole
// analysis).
template <size_t S, typename Check>
inline size_t sample_rounds(const char* base, size_t last, size_t stride, const uint8_t* map,
                            Check&& check) {
  const size_t s = S > 0 ? S : stride;
  size_t p = 0;
  while (p + 3 * s <= last) {
    const uint32_t marks = uint32_t{map[hash_gram(load_gram(base + p))]} |
                           uint32_t{map[hash_gram(load_gram(base + p + s))]} << 1 |
                           uint32_t{map[hash_gram(load_gram(base + p + 2 * s))]} << 2 |
                           uint32_t{map[hash_gram(load_gram(base + p + 3 * s))]} << 3;
    for (uint32_t m = marks; m != 0; m &= m - 1)
      check(p + static_cast<size_t>(std::countr_zero(m)) * s);
    p += 4 * s;
  }
  return p;
}

}  // namespace

void LiteralSearcher::find(std::string_view block, size_t accept_end,
                           std::vector<LiteralHit>& hits) const {
  const size_t first_hit = hits.size();
  const char* base = block.data();
  const size_t n = block.size();
  if (literals_.empty() || n < kGram) return;
  const uint8_t* map = map_.data();
  const size_t s = stride_;
  const size_t last = n - kGram;  // last valid sample position
  auto check = [&](size_t pos) {
    const uint32_t g = load_gram(base + pos);
    verify(base, n, pos, g, hash_gram(g), accept_end, hits);
  };
  size_t p = 0;
  switch (s) {
    case 4:
      p = sample_rounds<4>(base, last, s, map, check);
      break;
    case 5:
      p = sample_rounds<5>(base, last, s, map, check);
      break;
    case 6:
      p = sample_rounds<6>(base, last, s, map, check);
      break;
    default:
      p = sample_rounds<0>(base, last, s, map, check);
      break;
  }
  for (; p <= last; p += s) {
    if (map[hash_gram(load_gram(base + p))] != 0) check(p);
  }
  // Samples are in order but a literal's start is its sample minus an offset: sort the new hits.
  // They are nearly in order already, so an insertion sort is linear in practice.
  auto before = [](const LiteralHit& a, const LiteralHit& b) {
    return a.pos != b.pos ? a.pos < b.pos : a.literal < b.literal;
  };
  for (size_t i = first_hit + 1; i < hits.size(); ++i) {
    const LiteralHit h = hits[i];
    size_t j = i;
    while (j > first_hit && before(h, hits[j - 1])) {
      hits[j] = hits[j - 1];
      --j;
    }
    hits[j] = h;
  }
}

}  // namespace triage
