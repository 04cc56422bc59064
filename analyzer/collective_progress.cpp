#include "analyzer/collective_progress.h"

#include <algorithm>

namespace triage {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// The integer (optionally negative: PyTorch prints -1 for "none yet") right after `marker`.
std::optional<int64_t> number_after(std::string_view text, std::string_view marker) {
  const size_t at = text.find(marker);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view s = text.substr(at + marker.size());
  bool neg = false;
  if (!s.empty() && s.front() == '-') {
    neg = true;
    s.remove_prefix(1);
  }
  size_t n = 0;
  int64_t v = 0;
  while (n < s.size() && n < 18 && is_digit(s[n]))
    v = v * 10 + (s[n++] - '0');
  if (n == 0) return std::nullopt;
  return neg ? -v : v;
}

std::optional<int64_t> first_number_after(std::string_view text,
                                          std::initializer_list<std::string_view> markers) {
  for (const auto m : markers) {
    if (auto v = number_after(text, m)) return v;
  }
  return std::nullopt;
}

// "[PG 1 Rank 0]", "[PG 0 (default_pg) Rank 3]", "[PG ID 2 PG GUID 9 Rank 4]": the group's id and
// the rank in it. Lines without a group name print "[Rank 5]".
void read_prefix(std::string_view text, std::string& pg, int64_t& rank) {
  const size_t at = text.find("[PG ");
  if (at != std::string_view::npos) {
    const size_t close = text.find(']', at);
    std::string_view inside =
        text.substr(at + 4, close == std::string_view::npos ? 96 : close - at - 4);
    std::string_view id = inside;
    if (id.substr(0, 3) == "ID ") id.remove_prefix(3);
    size_t n = 0;
    while (n < id.size() && n < 32 && id[n] != ' ' && id[n] != '(' && id[n] != ']')
      ++n;
    pg = std::string(id.substr(0, n));
    if (auto r = number_after(inside, "Rank ")) rank = *r;
    return;
  }
  if (auto r = number_after(text, "[Rank ")) rank = *r;
}

}  // namespace

int64_t CollectiveProgress::reached() const {
  return std::max(last_enqueued, timed_out);
}

std::optional<CollectiveProgress> parse_collective_line(const LineText& lt) {
  const std::string_view text = lt.text;
  CollectiveProgress p;
  // The timed-out collective: 2.3+ "Timeout at NCCL work: N", 2.4-2.6 "detected by watchdog at
  // work: N", 2.7+ "at work sequence id: N", and every 2.x "WorkNCCL(SeqNum=N, ...)".
  if (auto v = first_number_after(text, {"Timeout at NCCL work: ", "detected by watchdog at work: ",
                                         "at work sequence id: ", "WorkNCCL(SeqNum="})) {
    p.timed_out = *v;
  }
  // "last enqueued NCCL work: E" (and "Last ..." in the dump-signal line), 2.7+ "last enqueued
  // work: E".
  if (auto v = first_number_after(text, {"nqueued NCCL work: ", "nqueued work: "}))
    p.last_enqueued = *v;
  if (auto v = first_number_after(text, {"completed NCCL work: ", "completed work: "}))
    p.last_completed = *v;
  if (p.timed_out == kSeqUnknown && p.last_enqueued == kSeqUnknown &&
      p.last_completed == kSeqUnknown) {
    return std::nullopt;
  }
  // "from  rank 7" (PyTorch prints two spaces) or "from this local rank".
  int64_t printed_rank = -1;
  read_prefix(text, p.pg, printed_rank);
  p.rank = lt.rank >= 0 ? lt.rank : printed_rank;
  if (p.rank < 0) return std::nullopt;
  const size_t from = text.find("collective timeout from ");
  if (from != std::string_view::npos) {
    std::string_view rest = text.substr(from + 24);
    while (!rest.empty() && rest.front() == ' ')
      rest.remove_prefix(1);
    if (rest.substr(0, 15) == "this local rank") {
      p.dump_from_rank = p.rank;
    } else if (auto r = number_after(rest.substr(0, 24), "rank ")) {
      p.dump_from_rank = *r;
    }
  }
  return p;
}

}  // namespace triage
