// Where a log line becomes a finding. One streaming pass over a log: blocks are read with read(2)
// into a fixed buffer, the literal search finds the few lines that can match anything, and only
// those lines are split into their decorations and matched against the catalog's patterns
// (harmless lines first) and fed to the fact extractors. The first and last lines are kept for the
// report. Memory does not grow with the log: findings are bounded per class.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/finding.h"
#include "analyzer/literal_search.h"
#include "analyzer/log_facts.h"
#include "analyzer/log_reader.h"
#include "analyzer/signature_catalog.h"

namespace triage {

// The catalog arranged for scanning: every distinct trigger literal and what it can lead to.
class ScanPlan {
 public:
  explicit ScanPlan(const SignatureCatalog& catalog);

  struct Use {
    enum Kind : uint8_t { kSignature, kHarmless, kFact, kVocab } kind = kSignature;
    uint32_t owner = 0;    // class index, harmless index, FactKind, or vocabulary entry index
    uint32_t pattern = 0;  // pattern index within the owner (kVocab: 0 token, 1 + i message i)
  };

  const SignatureCatalog& catalog() const { return *catalog_; }
  const std::vector<std::string>& triggers() const { return triggers_; }
  const std::vector<std::vector<Use>>& uses() const { return uses_; }
  // Class indices, most specific (smallest priority) first.
  const std::vector<uint32_t>& class_order() const { return class_order_; }
  const std::vector<uint32_t>& class_rank() const { return class_rank_; }
  // Per vocabulary entry: the index of its class.
  const std::vector<uint32_t>& vocab_class() const { return vocab_class_; }
  // The triggers' searcher, built once and not calibrated: what scans of small chunks share.
  const LiteralSearcher& searcher() const { return *searcher_; }

 private:
  const SignatureCatalog* catalog_;
  std::vector<std::string> triggers_;
  std::vector<std::vector<Use>> uses_;
  std::vector<uint32_t> class_order_;
  std::vector<uint32_t> class_rank_;  // position of each class in class_order_
  std::vector<uint32_t> vocab_class_;
  std::shared_ptr<const LiteralSearcher> searcher_;
};

struct ScanOptions {
  size_t head_lines = 80;
  size_t tail_lines = 200;
  size_t line_copy_bytes = 4096;  // per head/tail line
  size_t evidence_bytes = 2048;   // per finding's text
  size_t block_bytes = 1 << 20;
  uint64_t max_bytes = 0;      // 0 = the whole file (as large as it was when opened)
  int year_hint = 0;           // for timestamps without a year (0 = this year)
  std::string source = "log";  // Finding::source for this file
  bool collect_facts = true;
  // Each rank's own pace and the step-time series (rank_rhythm.h); off only to measure what they
  // cost (bench/straggler).
  bool rank_rhythm = true;
  // Whether to build a searcher calibrated on this log's first block (a whole log: worth it), or
  // to use the plan's shared one (a live follower's chunk of a few KiB, scanned every few seconds
  // for each running job: building a searcher would cost more than scanning the chunk).
  bool calibrate = true;
  // A live follower scans a growing log chunk by chunk: the number of the chunk's first line, and
  // the step segment the earlier chunks left open (see FactCollector::continue_steps).
  int64_t first_line = 1;
  std::optional<StepSegment> continue_steps;
};

struct ScanResult {
  uint64_t size_at_open = 0;
  uint64_t bytes_scanned = 0;
  int64_t lines = 0;  // lines read by this scan (numbered from ScanOptions::first_line)
  bool ends_without_newline = false;
  bool stopped_early = false;  // max_bytes reached before the end
  uint64_t long_lines = 0;     // lines longer than a block, scanned in pieces
  uint64_t candidate_lines = 0;
  std::vector<LineCopy> head;
  std::vector<LineCopy> tail;
  std::vector<ClassMatches> classes;                                    // by catalog class index
  std::vector<uint64_t> harmless_counts;                                // by harmless index
  std::map<int64_t, std::pair<int64_t, uint32_t>> first_error_by_rank;  // rank -> (line, class)
  LogFacts facts;
  double seconds = 0;
};

// Scans an open regular file from its current offset. Throws std::system_error on read errors.
ScanResult scan_log(int fd, const ScanPlan& plan, const ScanOptions& options);

}  // namespace triage
