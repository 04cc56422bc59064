#include "agent/history/history_split.h"

#include <cctype>

namespace triage::agent {

namespace {

class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}

  bool done() const { return pos_ >= s_.size(); }
  size_t pos() const { return pos_; }
  char peek() {
    skip_space();
    return done() ? '\0' : s_[pos_];
  }
  bool take(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  std::string_view slice(size_t from) const { return s_.substr(from, pos_ - from); }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_])) != 0)
      ++pos_;
  }

  // A string token at the cursor; its raw contents (escapes left as they are).
  std::optional<std::string_view> string() {
    if (peek() != '"') return std::nullopt;
    const size_t start = ++pos_;
    while (pos_ < s_.size() && s_[pos_] != '"')
      pos_ += s_[pos_] == '\\' ? 2u : 1u;
    if (pos_ >= s_.size()) return std::nullopt;
    return s_.substr(start, pos_++ - start);
  }

  // Skips one value; false when there is none, the input ends first or is unbalanced.
  bool skip_value() {
    const char c = peek();
    if (c == '"') return string().has_value();
    if (c == '{' || c == '[') return skip_nested(nullptr);
    const size_t start = pos_;
    while (!done() && s_[pos_] != ',' && s_[pos_] != '}' && s_[pos_] != ']' &&
           std::isspace(static_cast<unsigned char>(s_[pos_])) == 0)
      ++pos_;
    return pos_ > start && !done();
  }

  // Skips an object or array; reports a "job_id" member of the outermost object.
  bool skip_nested(std::optional<uint64_t>* job_id) {
    int depth = 0;
    do {
      const char c = peek();
      if (c == '"') {
        const auto s = string();
        if (!s) return false;
        if (job_id != nullptr && depth == 1 && *s == "job_id" && take(':')) *job_id = number();
        continue;
      }
      if (c == '\0') return false;
      if (c == '{' || c == '[') ++depth;
      if (c == '}' || c == ']') --depth;
      ++pos_;
    } while (depth > 0);
    return depth == 0;
  }

 private:
  // A plain unsigned integer at the cursor (not consumed unless it is one).
  std::optional<uint64_t> number() {
    skip_space();
    size_t end = pos_;
    uint64_t v = 0;
    while (end < s_.size() && std::isdigit(static_cast<unsigned char>(s_[end])) != 0) {
      if (v > (UINT64_MAX - 9) / 10) return std::nullopt;
      v = v * 10 + static_cast<uint64_t>(s_[end++] - '0');
    }
    if (end == pos_ || end >= s_.size() || s_[end] == '.' || s_[end] == 'e' || s_[end] == 'E')
      return std::nullopt;
    pos_ = end;
    return v;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

bool read_records(Cursor& c, std::vector<HistoryRecordText>& out) {
  if (!c.take('[')) return false;
  if (c.take(']')) return true;
  do {
    HistoryRecordText r;
    c.skip_space();
    const size_t start = c.pos();
    const bool ok = c.peek() == '{' ? c.skip_nested(&r.job_id) : c.skip_value();
    if (!ok) return false;
    r.text = c.slice(start);
    out.push_back(r);
  } while (c.take(','));
  return c.take(']');
}

}  // namespace

std::optional<HistoryAnswerText> split_history_answer(std::string_view body) {
  Cursor c(body);
  HistoryAnswerText out;
  bool have_records = false;
  if (!c.take('{')) return std::nullopt;
  if (c.take('}')) return std::nullopt;
  do {
    const auto key = c.string();
    if (!key || !c.take(':')) return std::nullopt;
    if (*key == "records") {
      if (!read_records(c, out.records)) return std::nullopt;
      have_records = true;
    } else if (*key == "host" && c.peek() == '"') {
      const auto host = c.string();
      if (!host) return std::nullopt;
      if (host->find('\\') == std::string_view::npos) out.host = std::string(*host);
    } else if (!c.skip_value()) {
      return std::nullopt;
    }
  } while (c.take(','));
  if (!c.take('}') || c.peek() != '\0' || !have_records) return std::nullopt;
  return out;
}

}  // namespace triage::agent
