#include "agent/slurm/job_comment.h"

#include <algorithm>

#include "common/hostlist.h"
#include "common/percent_decode.h"

namespace triage::agent {

namespace {

constexpr std::string_view kKey = "triage=";
// A class or blame longer than this is not one of ours; it is cut rather than crowd out the rest.
constexpr size_t kMaxWordBytes = 64;

char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool same_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return lower(x) == lower(y); });
}

// '+' is left out of the safe set: it marks the count of nodes a cut hostlist leaves out.
bool safe_byte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("/._,:@~[]-").find(static_cast<char>(c)) != std::string_view::npos;
}

std::string encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (safe_byte(c)) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string word(std::string_view s, std::string_view fallback) {
  std::string w = encode(s.empty() ? fallback : s);
  if (w.size() > kMaxWordBytes) w.resize(kMaxWordBytes);
  return w;
}

// The first `keep` nodes as a hostlist, then "+<n>" for the ones left out.
std::string nodes_value(const std::vector<std::string>& nodes, size_t keep) {
  const std::vector<std::string> kept(nodes.begin(), nodes.begin() + static_cast<long>(keep));
  std::string v = encode(compress_hostlist(kept));
  // Appended piece by piece, not "+" + string: GCC bug 105651 at -O3 (a false -Wrestrict).
  if (keep < nodes.size()) v.append("+").append(std::to_string(nodes.size() - keep));
  return v;
}

constexpr std::string_view kRefusedKey = "triage-refused=";

bool starts_with_key(std::string_view s, std::string_view key) {
  return s.size() >= key.size() && same_ignoring_case(s.substr(0, key.size()), key);
}

// Where an earlier `key` segment starts (npos: none). Only at the start or after a space, so
// "x-triage=1" or a quoted "triage=" inside another tool's JSON is not taken for ours.
size_t find_segment(std::string_view s, std::string_view key = kKey) {
  for (size_t i = 0; i < s.size(); ++i) {
    if ((i == 0 || s[i - 1] == ' ') && starts_with_key(s.substr(i), key)) return i;
  }
  return std::string_view::npos;
}

}  // namespace

std::string compose_triage_summary(const TriageSummary& s, size_t max_bytes) {
  const std::string head = std::string(kKey) + word(s.cls, "unknown") +
                           ";blame=" + word(s.blame, "none") +
                           (s.requeue.empty() ? "" : ";requeue=" + word(s.requeue, "")) + ";nodes=";
  const std::string report = s.report.empty() ? "" : ";report=" + encode(s.report);
  std::string out = head + nodes_value(s.nodes, s.nodes.size()) + report;
  if (out.size() <= max_bytes) return out;
  for (size_t keep = s.nodes.size(); keep-- > 0;) {
    out = head + nodes_value(s.nodes, keep);
    if (out.size() <= max_bytes) return out;
  }
  return out.substr(0, std::min(out.size(), max_bytes));
}

namespace {

CommentMerge merge_segment(std::string_view existing, std::string_view key, std::string_view ours,
                           size_t max_bytes) {
  CommentMerge m;
  std::string merged;
  if (const size_t at = find_segment(existing, key); at != std::string_view::npos) {
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
    m.unchanged = true;
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

}  // namespace

CommentMerge merge_triage_comment(std::string_view existing, std::string_view ours,
                                  size_t max_bytes) {
  return merge_segment(existing, kKey, ours, max_bytes);
}

std::string compose_refused_segment(std::string_view node, std::string_view why, size_t max_bytes) {
  std::string out = std::string(kRefusedKey) + word(node, "unknown") + ":" + encode(why);
  // Cut the reason, never inside a %xx escape.
  if (out.size() > max_bytes) {
    out.resize(max_bytes);
    const size_t pct = out.rfind('%');
    if (pct != std::string::npos && pct + 3 > out.size()) out.resize(pct);
  }
  return out;
}

CommentMerge merge_refused_comment(std::string_view existing, std::string_view ours,
                                   size_t max_bytes) {
  return merge_segment(existing, kRefusedKey, ours, max_bytes);
}

std::optional<MovedNote> refused_from_comment(std::string_view comment) {
  const size_t at = find_segment(comment, kRefusedKey);
  if (at == std::string_view::npos) return std::nullopt;
  const size_t end = std::min(comment.find(' ', at), comment.size());
  const std::string_view value =
      comment.substr(at + kRefusedKey.size(), end - at - kRefusedKey.size());
  // The node is encoded, so its ':' (none in a host name) ends it.
  const size_t colon = value.find(':');
  MovedNote m;
  m.node = percent_decode(value.substr(0, colon));
  if (colon != std::string_view::npos) m.reason = percent_decode(value.substr(colon + 1));
  if (m.node.empty()) return std::nullopt;
  return m;
}

CommentMerge merge_accounting_comment(std::string_view existing, std::string_view ours,
                                      size_t max_bytes) {
  if (existing.find_first_of("'\"|\n") != std::string_view::npos) {
    CommentMerge m;
    m.reason =
        "the comment holds a quote, '|' or newline of another tool's, which sacctmgr would "
        "change; it is left as it is";
    return m;
  }
  CommentMerge m = merge_triage_comment(existing, ours, max_bytes);
  if (m.write && same_ignoring_case(m.value, existing)) {
    m.write = false;
    m.unchanged = true;
    m.value.clear();
    m.reason = "the comment already says it (lowercased by sacctmgr)";
  }
  return m;
}

}  // namespace triage::agent
