#include "analyzer/log_scanner.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_map>

#include "analyzer/byte_scan.h"
#include "analyzer/line_text.h"
#include "analyzer/literal_search.h"
#include "common/safe_io.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage {

ScanPlan::ScanPlan(const SignatureCatalog& catalog) : catalog_(&catalog) {
  std::unordered_map<std::string, uint32_t> index;
  auto add = [&](const std::string& literal, Use use) {
    auto [it, inserted] = index.emplace(literal, static_cast<uint32_t>(triggers_.size()));
    if (inserted) {
      triggers_.push_back(literal);
      uses_.emplace_back();
    }
    uses_[it->second].push_back(use);
  };
  const auto& classes = catalog.classes();
  for (size_t c = 0; c < classes.size(); ++c) {
    for (size_t p = 0; p < classes[c].patterns.size(); ++p) {
      for (const auto& lit : classes[c].patterns[p].required) {
        add(lit, Use{Use::kSignature, static_cast<uint32_t>(c), static_cast<uint32_t>(p)});
      }
    }
  }
  const auto& harmless = catalog.harmless();
  for (size_t h = 0; h < harmless.size(); ++h) {
    for (size_t p = 0; p < harmless[h].patterns.size(); ++p) {
      for (const auto& lit : harmless[h].patterns[p].required) {
        add(lit, Use{Use::kHarmless, static_cast<uint32_t>(h), static_cast<uint32_t>(p)});
      }
    }
  }
  // A vocabulary's tokens and message strings are triggers like any other: the one literal search
  // finds them, and the line's structure decides whether they count (no pattern runs for them).
  // Shorter ones are left out (see kMinTriggerLength): a five-letter errno name is read through its
  // message text instead.
  const auto& vocab = catalog.vocabulary();
  for (size_t v = 0; v < vocab.entries.size(); ++v) {
    const VocabEntry& en = vocab.entries[v];
    vocab_class_.push_back(static_cast<uint32_t>(std::max(0, catalog.index_of(en.cls))));
    if (en.token.size() >= kMinTriggerLength)
      add(to_lower(en.token), Use{Use::kVocab, static_cast<uint32_t>(v), 0});
    for (size_t m = 0; m < en.messages.size(); ++m) {
      if (en.messages[m].size() >= kMinTriggerLength)
        add(to_lower(en.messages[m]),
            Use{Use::kVocab, static_cast<uint32_t>(v), static_cast<uint32_t>(m + 1)});
    }
  }
  for (const auto& ft : fact_triggers()) {
    add(ft.literal, Use{Use::kFact, static_cast<uint32_t>(ft.kind), 0});
  }

  class_order_.resize(classes.size());
  for (size_t i = 0; i < classes.size(); ++i)
    class_order_[i] = static_cast<uint32_t>(i);
  std::stable_sort(class_order_.begin(), class_order_.end(), [&](uint32_t a, uint32_t b) {
    return classes[a].priority < classes[b].priority;
  });
  class_rank_.resize(classes.size());
  for (size_t i = 0; i < class_order_.size(); ++i)
    class_rank_[class_order_[i]] = static_cast<uint32_t>(i);
  searcher_ = std::make_shared<const LiteralSearcher>(triggers_);
}

namespace {

// Patterns run on at most this much of one line; longer lines are matched around their literals.
constexpr size_t kMaxMatchText = size_t{64} * 1024;
constexpr size_t kMinOverlap = size_t{16} * 1024;
constexpr size_t kMaxRankErrors = 65536;
constexpr uint64_t kMaxTailScan = 64ull << 20;
// The pattern index of a candidate a vocabulary token named.
constexpr uint32_t kVocabPattern = UINT32_MAX - 1;

struct Candidate {
  uint32_t rank;  // position of the class in priority order
  uint32_t cls;
  uint32_t pattern;
};

// The class a vocabulary token on the line names, when it stands where its group reads it.
struct VocabHit {
  uint32_t rank = UINT32_MAX;
  uint32_t cls = 0;
  uint32_t entry = 0;
};

class Scanner {
 public:
  Scanner(const ScanPlan& plan, const ScanOptions& opt, ScanResult& out)
      : plan_(plan),
        opt_(opt),
        out_(out),
        facts_(opt.year_hint),
        year_(opt.year_hint != 0 ? opt.year_hint : utc_year(now_usec())),
        line_no_(opt.first_line) {
    if (opt.continue_steps) facts_.continue_steps(*opt.continue_steps);
    facts_.set_rank_rhythm(opt.rank_rhythm);
    out_.classes.assign(plan.catalog().classes().size(), ClassMatches{});
    out_.harmless_counts.assign(plan.catalog().harmless().size(), 0);
  }

  // Scans one block; `line_no` is the number of the line containing data[0].
  void block(const char* data, size_t size, const std::vector<LiteralHit>& hits) {
    data_ = data;
    size_t cursor = 0;
    size_t hi = 0;
    while (cursor < size) {
      if (facts_.lines_wanted() <= 0 || !opt_.collect_facts) {
        while (hi < hits.size() && hits[hi].pos < cursor)
          ++hi;
        if (hi == hits.size()) {
          line_no_ += static_cast<int64_t>(count_newlines(data + cursor, size - cursor));
          return;
        }
        const size_t pos = hits[hi].pos;
        const void* prev = ::memrchr(data + cursor, '\n', pos - cursor);
        const size_t ls = prev != nullptr
                              ? static_cast<size_t>(static_cast<const char*>(prev) - data) + 1
                              : cursor;
        line_no_ += static_cast<int64_t>(count_newlines(data + cursor, ls - cursor));
        cursor = ls;
      } else {
        // Lines only a per-rank block wants, up to the next literal's line, go to it in one go.
        while (hi < hits.size() && hits[hi].pos < cursor)
          ++hi;
        const size_t limit = hi < hits.size() ? hits[hi].pos : size;
        int64_t taken = 0;
        const size_t took =
            facts_.take_block_lines(data + cursor, limit - cursor, line_no_, &taken);
        if (took > 0) {
          cursor += took;
          line_no_ += taken;
          continue;
        }
      }
      const void* nl = std::memchr(data + cursor, '\n', size - cursor);
      const size_t le =
          nl != nullptr ? static_cast<size_t>(static_cast<const char*>(nl) - data) : size;
      size_t hj = hi;
      while (hj < hits.size() && hits[hj].pos < le)
        ++hj;
      line(cursor, le, hits.data() + hi, hits.data() + hj);
      hi = hj;
      if (nl == nullptr) return;
      cursor = le + 1;
      ++line_no_;
    }
  }

  void capture_head(const char* data, size_t size, bool starts_line, bool piece) {
    size_t pos = 0;
    if (!starts_line) {
      const void* nl = std::memchr(data, '\n', size);
      if (nl == nullptr) return;
      pos = static_cast<size_t>(static_cast<const char*>(nl) - data) + 1;
    }
    while (pos < size && out_.head.size() < opt_.head_lines) {
      const void* nl = std::memchr(data + pos, '\n', size - pos);
      const size_t end =
          nl != nullptr ? static_cast<size_t>(static_cast<const char*>(nl) - data) : size;
      LineCopy lc;
      lc.number = static_cast<int64_t>(out_.head.size()) + 1;
      lc.length = end - pos;
      std::string_view text(data + pos, std::min(end - pos, opt_.line_copy_bytes));
      if (!text.empty() && text.back() == '\r' && end - pos <= opt_.line_copy_bytes)
        text.remove_suffix(1);
      lc.text = std::string(text);
      lc.truncated = end - pos > opt_.line_copy_bytes || (nl == nullptr && piece);
      if (opt_.collect_facts) facts_.on_header_line(lc.text);
      out_.head.push_back(std::move(lc));
      if (nl == nullptr) break;
      pos = end + 1;
    }
  }

  int64_t line_no() const { return line_no_; }
  FactCollector& facts() { return facts_; }

 private:
  void line(size_t ls, size_t le, const LiteralHit* hb, const LiteralHit* he) {
    const size_t len = le - ls;
    std::string_view whole(data_ + ls, len);
    LineText lt;
    if (len <= kMaxMatchText) {
      lt = split_line(whole);
    } else {
      // Match around the literals: a pattern never needs megabytes of context.
      const size_t first = hb != he ? hb->pos : ls;
      const size_t from = first > ls + kMaxMatchText / 4 ? first - kMaxMatchText / 4 : ls;
      const size_t to = std::min(le, from + kMaxMatchText);
      const LineText head = split_line(whole.substr(0, 64));
      lt = from == ls ? split_line(std::string_view(data_ + from, to - from)) : LineText{};
      if (from != ls) {
        lt.raw = std::string_view(data_ + from, to - from);
        lt.text = lt.raw;
      }
      lt.rank = head.rank;
    }

    uint32_t fact_mask = 0;
    bool harmless_candidate = false;
    candidates_.clear();
    bool vocab_candidate = false;
    for (const LiteralHit* h = hb; h != he; ++h) {
      if (h != hb && h[-1].literal == h->literal) continue;
      for (const auto& use : plan_.uses()[h->literal]) {
        switch (use.kind) {
          case ScanPlan::Use::kVocab:
            vocab_candidate = true;
            break;
          case ScanPlan::Use::kFact:
            fact_mask |= 1u << use.owner;
            break;
          case ScanPlan::Use::kHarmless:
            harmless_candidate = true;
            break;
          case ScanPlan::Use::kSignature:
            candidates_.push_back(Candidate{plan_.class_rank()[use.owner], use.owner, use.pattern});
            break;
        }
      }
    }
    VocabHit vocab;
    if (vocab_candidate) vocab = read_vocabulary(lt, hb, he);
    if (vocab.rank != UINT32_MAX) {
      // The token's class competes with the patterns' by priority, like any other candidate.
      candidates_.push_back(Candidate{vocab.rank, vocab.cls, kVocabPattern});
    }
    if (!candidates_.empty() || harmless_candidate) ++out_.candidate_lines;
    bool harmless = false;
    if (harmless_candidate) {
      const auto& entries = plan_.catalog().harmless();
      for (const LiteralHit* h = hb; h != he && !harmless; ++h) {
        for (const auto& use : plan_.uses()[h->literal]) {
          if (use.kind != ScanPlan::Use::kHarmless) continue;
          if (pattern_matches(entries[use.owner].patterns[use.pattern], lt.text) &&
              follows(entries[use.owner], ls)) {
            ++out_.harmless_counts[use.owner];
            harmless = true;
            break;
          }
        }
      }
    }
    if (!harmless && !candidates_.empty()) classify(lt, ls, le, hb, he, vocab);
    if (opt_.collect_facts && (fact_mask != 0 || facts_.lines_wanted() > 0))
      facts_.on_line(lt, line_no_, fact_mask);
  }

  // Whether the line starting at `ls` comes right after a line the entry's `after` asks for. A
  // line that opens the block has no line before it here, so it keeps its finding: the rare miss
  // is a false alarm left standing, never a failure silenced.
  bool follows(const HarmlessEntry& h, size_t ls) const {
    if (h.after.empty()) return true;
    if (ls == 0) return false;
    const size_t end = ls - 1;  // the line break that ends the line before
    const void* nl = ::memrchr(data_, '\n', end);
    const size_t start =
        nl != nullptr ? static_cast<size_t>(static_cast<const char*>(nl) - data_) + 1 : 0;
    std::string_view before(data_ + start, end - start);
    if (!before.empty() && before.back() == '\r') before.remove_suffix(1);
    const std::string_view text = split_line(before).text;
    return std::any_of(h.after.begin(), h.after.end(),
                       [&](const CompiledPattern& p) { return pattern_matches(p, text); });
  }

  // Reads the vocabulary tokens the literal search found on the line: each counts only where its
  // group reads it (the type of an exception line, inside its message, a status, an NCCL line).
  // The most specific class among them wins.
  VocabHit read_vocabulary(const LineText& lt, const LiteralHit* hb, const LiteralHit* he) const {
    VocabHit best;
    const std::string_view text = lt.text;
    if (text.data() < data_) return best;
    const auto text_at = static_cast<size_t>(text.data() - data_);
    ExceptionLine exc;
    const bool is_exc = parse_exception_line(text, exc);
    const Vocabulary& vocab = plan_.catalog().vocabulary();
    for (const LiteralHit* h = hb; h != he; ++h) {
      if (h->pos < text_at || h->pos >= text_at + text.size()) continue;
      const size_t at = h->pos - text_at;
      for (const auto& use : plan_.uses()[h->literal]) {
        if (use.kind != ScanPlan::Use::kVocab) continue;
        const VocabEntry& en = vocab.entries[use.owner];
        const std::string& word = use.pattern == 0 ? en.token : en.messages[use.pattern - 1];
        // Tokens are names, spelled exactly; message texts are printed in either case (libuv
        // lower-cases strerror's).
        if (use.pattern == 0 && text.substr(at, word.size()) != word) continue;
        const VocabGroup& g = vocab.groups[en.group];
        const bool placed = std::any_of(g.places.begin(), g.places.end(), [&](VocabPlace p) {
          // A message text is prose any line may hold: it counts only inside an exception's
          // message, a line NCCL, Slurm, Open MPI/PMIx or UCX printed, or as the line a help
          // text opens; never as a bare word or a status.
          if (use.pattern != 0 && (p == VocabPlace::kExceptionType || p == VocabPlace::kStatus ||
                                   p == VocabPlace::kWord))
            return false;
          return token_in_place(text, at, word.size(), p, is_exc ? &exc : nullptr);
        });
        if (!placed) continue;
        const uint32_t cls = plan_.vocab_class()[use.owner];
        const uint32_t rank = plan_.class_rank()[cls];
        if (rank < best.rank) best = VocabHit{rank, cls, use.owner};
      }
    }
    return best;
  }

  void classify(const LineText& lt, size_t ls, size_t le, const LiteralHit* hb,
                const LiteralHit* he, const VocabHit& vocab) {
    std::sort(candidates_.begin(), candidates_.end(), [](const Candidate& a, const Candidate& b) {
      return a.rank != b.rank ? a.rank < b.rank : a.pattern < b.pattern;
    });
    const auto& classes = plan_.catalog().classes();
    size_t i = 0;
    while (i < candidates_.size()) {
      const uint32_t cls = candidates_[i].cls;
      bool matched = false;
      bool as_cause = false;
      uint32_t last_pattern = UINT32_MAX;
      for (; i < candidates_.size() && candidates_[i].cls == cls; ++i) {
        if (matched || candidates_[i].pattern == last_pattern) continue;
        last_pattern = candidates_[i].pattern;
        captures_.clear();
        if (candidates_[i].pattern == kVocabPattern) {
          matched = true;  // read_vocabulary already placed the token
          continue;
        }
        const CompiledPattern& p = classes[cls].patterns[candidates_[i].pattern];
        matched = pattern_matches(p, lt.text, &captures_);
        as_cause = matched && p.as_cause;
      }
      if (!matched) continue;
      bool excluded = false;
      for (const auto& ex : classes[cls].excludes) {
        if (pattern_matches(ex, lt.text)) {
          excluded = true;
          break;
        }
      }
      if (excluded) continue;
      const bool by_vocab =
          last_pattern == kVocabPattern || (vocab.rank != UINT32_MAX && vocab.cls == cls);
      record(cls, lt, ls, le, hb, he, as_cause,
             by_vocab ? &plan_.catalog().vocabulary().entries[vocab.entry] : nullptr);
      return;
    }
  }

  void record(uint32_t cls, const LineText& lt, size_t ls, size_t le, const LiteralHit* hb,
              const LiteralHit* he, bool as_cause, const VocabEntry* named) {
    const SignatureClass& c = plan_.catalog().classes()[cls];
    // Filled in place: for a line repeated a million times the same few findings are reused.
    Finding& f = out_.classes[cls].next();
    f.cause = as_cause;
    f.cls.assign(c.id);
    if (named != nullptr) f.vocabulary.assign(named->id);
    f.source.assign(opt_.source);
    f.line = line_no_;
    const size_t len = le - ls;
    if (len <= opt_.evidence_bytes) {
      f.text.assign(lt.raw.data() == data_ + ls ? lt.raw : std::string_view(data_ + ls, len));
    } else {
      const size_t first = hb != he ? hb->pos : ls;
      const size_t from =
          first > ls + opt_.evidence_bytes / 4 ? first - opt_.evidence_bytes / 4 : ls;
      const size_t to = std::min(le, from + opt_.evidence_bytes);
      f.text.assign(data_ + from, to - from);
      f.truncated = true;
    }
    if (!f.text.empty() && f.text.back() == '\r') f.text.pop_back();
    f.rank = lt.rank;
    f.stage.assign(c.stage);
    for (const auto& [name, value] : captures_) {
      if (name == "host") {
        f.host = value;
      } else if (name == "stage") {
        f.stage = value;
      } else if (name == "time") {
        f.time_usec = leading_timestamp_usec(value, year_).value_or(0);
      }
    }
    if (f.time_usec == 0) f.time_usec = leading_timestamp_usec(lt.text, year_).value_or(0);
    f.captures.swap(captures_);  // captures_ takes the old ones' storage for the next line
    if (!c.traceback && opt_.collect_facts) f.traceback_line = facts_.open_traceback(lt.rank);
    if (c.role == ClassRole::kCause && lt.rank >= 0 &&
        out_.first_error_by_rank.size() < kMaxRankErrors) {
      out_.first_error_by_rank.try_emplace(lt.rank, line_no_, cls);
    }
  }

  const ScanPlan& plan_;
  const ScanOptions& opt_;
  ScanResult& out_;
  FactCollector facts_;
  int year_;
  std::vector<Candidate> candidates_;
  std::vector<std::pair<std::string, std::string>> captures_;  // the matching pattern's groups
  const char* data_ = nullptr;
  int64_t line_no_;
};

}  // namespace

ScanResult scan_log(int fd, const ScanPlan& plan, const ScanOptions& options) {
  const int64_t t0 = monotonic_usec();
  ScanResult out;
  const off_t start = ::lseek(fd, 0, SEEK_CUR);
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_errno("stat log", errno);
  out.size_at_open = static_cast<uint64_t>(st.st_size);
  uint64_t limit = out.size_at_open;
  if (options.max_bytes != 0 && limit > options.max_bytes) {
    limit = options.max_bytes;
    out.stopped_early = true;
  }

  std::optional<LiteralSearcher> own;
  if (options.calibrate) own.emplace(plan.triggers());
  const LiteralSearcher& searcher = own ? *own : plan.searcher();
  const size_t overlap = std::max(kMinOverlap, 2 * searcher.max_length());
  BlockReader reader(fd, limit, std::max(options.block_bytes, 8 * overlap), overlap);
  Scanner scanner(plan, options, out);
  std::vector<LiteralHit> hits;
  bool calibrated = false;
  char last_byte = '\n';
  bool previous_was_piece = false;
  LogBlock b;
  while (reader.next(b)) {
    char* data = reader.mutable_data();
    size_t size = b.size;
    size_t accept = b.accept_end;
    if (size > 0) last_byte = data[size - 1];
    const bool piece = b.ends_inside_line && !b.at_eof;
    if (piece && !previous_was_piece) ++out.long_lines;
    previous_was_piece = piece;
    if (!piece) {
      // Colour codes can sit inside a phrase; the bytes after an ordinary block are not reused, so
      // the block can be compacted in place.
      size = strip_ansi_in_place(data, size);
      accept = size;
    }
    if (own && !calibrated) {
      own->calibrate(std::string_view(data, size));
      calibrated = true;
    }
    if (out.head.size() < options.head_lines)
      scanner.capture_head(data, size, b.starts_line, piece);
    hits.clear();
    searcher.find(std::string_view(data, size), accept, hits);
    // In a long line's piece, hits past `accept` were left for the next piece, which repeats them.
    scanner.block(data, size, hits);
  }
  out.bytes_scanned = reader.bytes_read();
  out.ends_without_newline = out.bytes_scanned > 0 && last_byte != '\n';
  out.lines = scanner.line_no() - options.first_line + (out.ends_without_newline ? 1 : 0);
  out.tail =
      read_tail_lines(fd, static_cast<uint64_t>(std::max<off_t>(start, 0)) + out.bytes_scanned,
                      options.first_line - 1 + out.lines, options.tail_lines,
                      options.line_copy_bytes, kMaxTailScan);
  for (auto& m : out.classes)
    m.settle();
  out.facts = scanner.facts().take();
  out.seconds = static_cast<double>(monotonic_usec() - t0) / 1e6;
  return out;
}

}  // namespace triage
