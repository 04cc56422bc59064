#include "analyzer/vocabulary.h"

#include <algorithm>
#include <optional>
#include <set>

namespace triage {

namespace {

bool is_ident(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Whether a type's name says it is an exception class ("ValueError", "CustomException").
bool names_exception(std::string_view type) {
  return (type.size() > 5 && type.ends_with("Error")) || type.ends_with("Exception");
}

std::optional<VocabPlace> parse_place(std::string_view v) {
  if (v == "exception-type") return VocabPlace::kExceptionType;
  if (v == "exception-message") return VocabPlace::kExceptionMessage;
  if (v == "status") return VocabPlace::kStatus;
  if (v == "nccl-line") return VocabPlace::kNcclLine;
  if (v == "slurm-line") return VocabPlace::kSlurmLine;
  if (v == "word") return VocabPlace::kWord;
  if (v == "help-line") return VocabPlace::kHelpLine;
  if (v == "mpi-line") return VocabPlace::kMpiLine;
  if (v == "ucx-line") return VocabPlace::kUcxLine;
  return std::nullopt;
}

std::optional<Blame> parse_blame_word(std::string_view v) {
  for (Blame b : {Blame::kUserCode, Blame::kUserConfig, Blame::kInputData, Blame::kPlatform,
                  Blame::kScheduler, Blame::kUnknown}) {
    if (to_string(b) == v) return b;
  }
  return std::nullopt;
}

std::string_view trim_view(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// "file:line: [vocab id]: key: message": the entry's own line, naming its section and key.
InputError entry_error(const RuleSection& sec, const RuleEntry& e, const std::string& message) {
  return InputError(sec.file, e.line,
                    "[" + sec.type + " " + sec.id + "]: " + e.key + ": " + message);
}

}  // namespace

bool VocabGroup::reads_in(VocabPlace p) const {
  return std::find(places.begin(), places.end(), p) != places.end();
}

Vocabulary load_vocabulary(const std::vector<RuleSection>& sections,
                           const std::vector<std::string>& class_ids,
                           std::vector<InputError>& errors) {
  Vocabulary v;
  const std::set<std::string> classes(class_ids.begin(), class_ids.end());
  auto known_class = [&](const std::string& id) { return classes.count(id) != 0; };

  for (const auto& sec : sections) {
    if (sec.type != "vocab-group") continue;
    VocabGroup g;
    g.id = sec.id;
    g.title = sec.id;
    g.file = sec.file;
    g.line = sec.line;
    for (const auto& e : sec.entries) {
      if (e.key == "title") {
        g.title = e.value;
      } else if (e.key == "defined-in") {
        g.defined_in = e.value;
      } else if (e.key == "read-in") {
        const auto p = parse_place(e.value);
        if (!p) {
          errors.push_back(
              entry_error(sec, e,
                          "expected exception-type, exception-message, status, "
                          "nccl-line, slurm-line, help-line, mpi-line, ucx-line or word"));
        } else {
          g.places.push_back(*p);
        }
      } else if (e.key == "example") {
        // `example = CLASS | a log line`: the class first, since a log line may hold any text.
        const size_t bar = e.value.find(" | ");
        const std::string cls(trim_view(std::string_view(e.value).substr(0, bar)));
        if (bar == std::string::npos || e.value.size() <= bar + 3) {
          errors.push_back(entry_error(sec, e, "expected 'CLASS | log line'"));
        } else if (!known_class(cls)) {
          errors.push_back(entry_error(sec, e, "unknown class '" + cls + "'"));
        } else {
          g.examples.push_back({cls, e.value.substr(bar + 3), e.line});
        }
      } else {
        errors.push_back(sec.error(e, "unknown key (see docs/rules-format.md, vocabularies)"));
      }
    }
    if (g.defined_in.empty()) errors.push_back(sec.error("defined-in: missing"));
    if (g.places.empty()) errors.push_back(sec.error("read-in: missing"));
    if (g.examples.empty()) errors.push_back(sec.error("example: a group needs at least one"));
    v.groups.push_back(std::move(g));
  }

  for (const auto& sec : sections) {
    if (sec.type != "vocab") continue;
    VocabEntry en;
    en.id = sec.id;
    en.file = sec.file;
    en.line = sec.line;
    const size_t dot = sec.id.find('.');
    const std::string group = sec.id.substr(0, dot);
    const auto g = std::find_if(v.groups.begin(), v.groups.end(),
                                [&](const VocabGroup& x) { return x.id == group; });
    if (dot == std::string::npos || g == v.groups.end()) {
      errors.push_back(
          sec.error("a vocabulary entry's id is GROUP.NAME, with a [vocab-group GROUP]"));
      continue;
    }
    en.group = static_cast<uint32_t>(g - v.groups.begin());
    bool ok = true;
    for (const auto& e : sec.entries) {
      if (e.key == "token") {
        en.token = e.value;
      } else if (e.key == "message") {
        if (e.value.empty()) {
          errors.push_back(entry_error(sec, e, "expected the message text"));
          ok = false;
        } else {
          en.messages.push_back(e.value);
        }
      } else if (e.key == "means") {
        en.means = e.value;
      } else if (e.key == "class") {
        en.cls = e.value;
        if (!known_class(en.cls)) {
          errors.push_back(entry_error(sec, e, "unknown class '" + en.cls + "'"));
          ok = false;
        }
      } else if (e.key == "blame") {
        const auto b = parse_blame_word(e.value);
        if (!b) {
          errors.push_back(entry_error(sec, e,
                                       "expected user-code, user-config, input-data, platform, "
                                       "scheduler or unknown"));
          ok = false;
        } else {
          en.blame = *b;
          en.has_blame = true;
        }
      } else if (e.key == "defined-in") {
        en.defined_in = e.value;
      } else {
        errors.push_back(
            entry_error(sec, e, "unknown key (see docs/rules-format.md, vocabularies)"));
        ok = false;
      }
    }
    if (en.token.empty() && en.messages.empty()) {
      errors.push_back(sec.error("token: missing (an entry needs a token or a message)"));
      ok = false;
    }
    if (en.cls.empty()) {
      errors.push_back(sec.error("class: missing"));
      ok = false;
    }
    if (en.defined_in.empty() && g->defined_in.empty()) {
      errors.push_back(sec.error("defined-in: missing (neither the entry nor its group names it)"));
      ok = false;
    }
    if (en.defined_in.empty()) en.defined_in = g->defined_in;
    if (ok) v.entries.push_back(std::move(en));
  }
  return v;
}

bool parse_exception_line(std::string_view text, ExceptionLine& out) {
  // A line quoted as it was pasted ("`RuntimeError: ...`" in a bug report, a message wrapped in
  // quotes by a logger) is still the exception line: the opening marks are not part of the type.
  size_t start = 0;
  while (start < text.size() && start < 3 &&
         (text[start] == '`' || text[start] == '"' || text[start] == '\''))
    ++start;
  size_t i = start;
  size_t last = start;  // start of the current dotted component
  while (i < text.size() && (is_ident(text[i]) || text[i] == '.')) {
    if (text[i] == '.') last = i + 1;
    ++i;
  }
  if (i == start || last >= i) return false;
  const std::string_view type = text.substr(last, i - last);
  if (!(type.front() >= 'A' && type.front() <= 'Z')) return false;
  // A type name, not a shouted word ("ERROR:", "WARNING:"): it has a lower-case letter.
  if (std::none_of(type.begin(), type.end(), [](char c) { return c >= 'a' && c <= 'z'; }))
    return false;
  size_t msg = i;
  if (i < text.size()) {
    if (text[i] != ':') return false;
    msg = i + 1;
    // Python prints ": " after the type; a message raised or logged as "ValueError:text" lacks
    // the space. Without it only a name that says it is an exception counts (PEP 8: exception
    // names end in "Error"; the hierarchy's roots are "Exception" and "BaseException"), so
    // "Epoch:3" or "Note:x" stay prose.
    if (msg < text.size() && text[msg] != ' ' && !names_exception(type)) return false;
    while (msg < text.size() && text[msg] == ' ')
      ++msg;
  }
  out.module = last > start ? text.substr(start, last - 1 - start) : std::string_view();
  out.type = type;
  out.message = text.substr(msg);
  out.message_at = msg;
  out.at = start;
  return true;
}

bool is_slurm_line(std::string_view text) {
  for (std::string_view prog : {"srun", "slurmstepd", "slurmd", "salloc", "sbatch"}) {
    if (text.substr(0, prog.size()) != prog) continue;
    const std::string_view rest = text.substr(prog.size());
    if (rest.substr(0, 2) == ": ") return true;
    // slurmstepd-<node>: the node's name runs to the colon, without a space.
    if (prog == "slurmstepd" && !rest.empty() && rest.front() == '-') {
      const size_t colon = rest.find(": ");
      if (colon != std::string_view::npos &&
          rest.substr(0, colon).find(' ') == std::string_view::npos)
        return true;
    }
  }
  return false;
}

namespace {

// `name.c:123` followed by a space at `at`: the source position UCX's logger and Open MPI's
// opal_output_verbose print before a message. Returns the offset after it, or npos.
size_t source_position_end(std::string_view text, size_t at) {
  size_t i = at;
  while (i < text.size() && (is_ident(text[i]) || text[i] == '.'))
    ++i;
  if (i < at + 3 || text.substr(i - 2, 2) != ".c" || i >= text.size() || text[i] != ':')
    return std::string_view::npos;
  size_t d = i + 1;
  while (d < text.size() && text[d] >= '0' && text[d] <= '9')
    ++d;
  if (d == i + 1 || d >= text.size() || text[d] != ' ') return std::string_view::npos;
  return d;
}

// Whether `text` holds `file.c:NNN` followed by `Error: ` (Open MPI's common_ucx/pml_ucx error
// lines: "pml_ucx.c:309  Error: Failed to create UCP worker").
bool has_ompi_verbose_error(std::string_view text) {
  size_t at = 0;
  while ((at = text.find("Error: ", at)) != std::string_view::npos) {
    size_t b = at;
    while (b > 0 && text[b - 1] == ' ')
      --b;
    size_t start = b;
    while (start > 0 && text[start - 1] != ' ' && text[start - 1] != ']')
      --start;
    if (b > start && source_position_end(text, start) == b) return true;
    at += 7;
  }
  return false;
}

}  // namespace

bool is_mpi_line(std::string_view text) {
  for (std::string_view marker :
       {"OPAL ERROR: ", "ORTE_ERROR_LOG: ", "PRTE_ERROR_LOG: ", "PMIX ERROR: ", "PRTE ERROR: "}) {
    if (text.find(marker) != std::string_view::npos) return true;
  }
  if (has_ompi_verbose_error(text)) return true;
  // The error handler's banner: "[host:pid] *** An error occurred in MPI_Init" (Open MPI prints
  // it with and without the prefix).
  std::string_view rest = text;
  if (!rest.empty() && rest.front() == '[') {
    const size_t close = rest.find("] ");
    if (close == std::string_view::npos) return false;
    rest.remove_prefix(close + 2);
  }
  return rest.substr(0, 4) == "*** ";
}

bool is_ucx_error_line(std::string_view text) {
  // A line with UCX's level: only ERROR and FATAL count.
  size_t at = 0;
  while ((at = text.find("UCX ", at)) != std::string_view::npos) {
    const bool word_start = at == 0 || !is_ident(text[at - 1]);
    size_t i = at + 3;
    while (i < text.size() && text[i] == ' ')
      ++i;
    const std::string_view level = text.substr(i, 5);
    if (word_start) {
      if (level == "ERROR" || level == "FATAL") return true;
      for (std::string_view other : {"WARN", "DIAG", "INFO", "DEBUG", "TRACE", "PRINT"}) {
        if (level.substr(0, other.size()) == other) return false;
      }
    }
    at += 4;
  }
  // UCX's fatal-error handler prints no level: "[host:pid:thread:tid] file.c:line  message"
  // (ucs_log_fatal_error, "[%s:%-5d:%s:%d] "), its signal report without the position.
  size_t pos = 0;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find("] ");
    if (close == std::string_view::npos) return false;
    const std::string_view inside = text.substr(1, close - 1);
    if (std::count(inside.begin(), inside.end(), ':') != 3) return false;
    pos = close + 2;
    if (text.substr(pos, 14) == "Caught signal ") return true;
  }
  // The logger's source position (%17s:%-4u), right-aligned, opens what is left.
  while (pos < text.size() && text[pos] == ' ')
    ++pos;
  return source_position_end(text, pos) != std::string_view::npos;
}

bool token_in_place(std::string_view text, size_t at, size_t len, VocabPlace place,
                    const ExceptionLine* exc) {
  if (at + len > text.size()) return false;
  const bool word_start = at == 0 || !is_ident(text[at - 1]);
  const bool word_end = at + len == text.size() || !is_ident(text[at + len]);
  switch (place) {
    case VocabPlace::kExceptionType:
      // The type's name, or the type with (the tail of) its module path: the token ends where the
      // type does and starts at a component boundary.
      return exc != nullptr && text.data() + at + len == exc->type.data() + exc->type.size() &&
             text.data() + at <= exc->type.data() && at >= exc->at &&
             (at == exc->at || text[at - 1] == '.');
    case VocabPlace::kExceptionMessage:
      return exc != nullptr && at >= exc->message_at && word_start && word_end;
    case VocabPlace::kStatus:
      return word_start && at + len < text.size() && text[at + len] == ':';
    case VocabPlace::kNcclLine:
      return word_start && word_end &&
             (text.find("NCCL") != std::string_view::npos ||
              text.find("RCCL") != std::string_view::npos);
    case VocabPlace::kSlurmLine:
      return word_start && word_end && is_slurm_line(text);
    case VocabPlace::kWord:
      return word_start && word_end;
    case VocabPlace::kHelpLine:
      // A help text's line opens the log line; a pasted copy may be indented.
      return text.substr(0, at).find_first_not_of(" \t") == std::string_view::npos;
    case VocabPlace::kMpiLine:
      return word_start && word_end && is_mpi_line(text);
    case VocabPlace::kUcxLine:
      return word_start && word_end && is_ucx_error_line(text);
  }
  return false;
}

}  // namespace triage
