#include "agent/hang_comment.h"

#include "common/time_util.h"

namespace triage::agent {

std::string hang_comment_summary(int64_t flagged_usec, int64_t step) {
  std::string s = "triage=hang;flagged=" + format_utc(flagged_usec);
  if (step >= 0) s += ";step=" + std::to_string(step);
  return s;
}

namespace {

constexpr std::string_view kKey = "triage=";

bool starts_with_key(std::string_view s) {
  if (s.size() < kKey.size()) return false;
  for (size_t i = 0; i < kKey.size(); ++i) {
    // Slurm 22.05's sacctmgr lowercases the field; an uppercase copy is still ours.
    const char c = s[i] >= 'A' && s[i] <= 'Z' ? static_cast<char>(s[i] - 'A' + 'a') : s[i];
    if (c != kKey[i]) return false;
  }
  return true;
}

// Where an earlier triage= segment starts (npos: none). Only at the start or after a space, so
// "x-triage=1" or a quoted "triage=" inside another tool's JSON is not taken for ours.
size_t find_segment(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if ((i == 0 || s[i - 1] == ' ') && starts_with_key(s.substr(i))) return i;
  }
  return std::string_view::npos;
}

}  // namespace

CommentMerge merge_triage_comment(std::string_view existing, std::string_view ours,
                                  size_t max_bytes) {
  CommentMerge m;
  std::string merged;
  if (const size_t at = find_segment(existing); at != std::string_view::npos) {
    const size_t end = std::min(existing.find(' ', at), existing.size());
    merged.append(existing.substr(0, at)).append(ours).append(existing.substr(end));
  } else if (existing.empty()) {
    merged = ours;
  } else {
    merged.append(existing);
    if (merged.back() != ' ') merged += ' ';
    merged.append(ours);
  }
  if (merged == existing) {
    m.reason = "the comment already says it";
  } else if (merged.size() > max_bytes) {
    m.reason = "the comment holds " + std::to_string(existing.size()) +
               " bytes of other text; ours would pass the " + std::to_string(max_bytes) +
               "-byte bound, so it is left as it is";
  } else {
    m.write = true;
    m.value = std::move(merged);
    m.reason = existing.empty() ? "the comment was empty" : "kept the existing text";
  }
  return m;
}

}  // namespace triage::agent
