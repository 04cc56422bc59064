// Finds every occurrence of a set of literals (case-insensitively) in a block of log text, fast
// enough to run over every byte of a multi-gigabyte log.
//
// How: every literal is at least `min_length` bytes long, so any occurrence covers `stride =
// min_length - 3` consecutive 4-byte windows. Sampling the text every `stride` bytes therefore hits
// each occurrence at exactly one of `stride` consecutive offsets inside the literal. Each literal
// picks the `stride` offsets whose 4-grams are rarest in the log itself (calibrate() counts 4-grams
// in the log's first block), and only those 4-grams are marked in a 64 KiB table. The hot loop is
// one unaligned load, an OR to fold case, a multiply-shift hash and a table load per sample; a
// marked sample is checked against the exact 4-gram and the whole literal is compared before a hit
// is reported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace triage {

struct LiteralHit {
  size_t pos = 0;        // offset of the literal's first byte in the searched block
  uint32_t literal = 0;  // index into the literal list
};

class LiteralSearcher {
 public:
  // `literals` must be lower-case ASCII-folded and at least 4 bytes long; duplicates are allowed
  // (each index reports its own hits).
  explicit LiteralSearcher(std::vector<std::string> literals);

  // Chooses, for each literal, the offsets whose 4-grams are rarest in `sample` (typically the
  // first block of the log). Without calibration the literal's first offsets are used.
  void calibrate(std::string_view sample);

  // Appends to `hits` every occurrence that starts before `accept_end` and ends inside `block`,
  // sorted by position.
  void find(std::string_view block, size_t accept_end, std::vector<LiteralHit>& hits) const;

  size_t stride() const { return stride_; }
  size_t max_length() const { return max_length_; }
  const std::vector<std::string>& literals() const { return literals_; }

 private:
  struct Probe {
    uint32_t gram = 0;  // folded 4-gram
    uint32_t literal = 0;
    uint32_t offset = 0;  // of the 4-gram inside the literal
    uint32_t length = 0;  // of the literal
    uint32_t text = 0;    // where the literal starts in text_
  };
  void build(const std::vector<uint32_t>* counts);
  void verify(const char* base, size_t block_len, size_t pos, uint32_t gram, uint32_t h,
              size_t accept_end, std::vector<LiteralHit>& hits) const;

  std::vector<std::string> literals_;
  size_t stride_ = 1;
  size_t max_length_ = 0;
  std::vector<uint8_t> map_;  // non-zero for hash values some probe has
  // probes_[slot_start_[s] .. slot_start_[s + 1]) have hash values h with h >> kSlotShift == s:
  // a table small enough to stay in cache beside map_, as the literals' bytes in text_ do (a
  // marked sample is looked up at random; a 256 KiB table of all hash values missed the cache).
  std::vector<uint32_t> slot_start_;
  std::vector<Probe> probes_;
  std::string text_;  // every literal, back to back
};

}  // namespace triage
