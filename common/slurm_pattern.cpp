#include "common/slurm_pattern.h"

#include <cctype>

namespace triage {

namespace {

constexpr uint64_t kSlurmNoVal = 0xfffffffe;
constexpr size_t kMaxPad = 10;

std::string padded(uint64_t v, size_t width) {
  std::string s = std::to_string(v);
  if (s.size() < width) s.insert(0, width - s.size(), '0');
  return s;
}

// The value of one token, or nullopt when `c` is not a token letter.
std::optional<std::string> token_value(char c, size_t width, const SlurmPatternContext& ctx) {
  switch (c) {
    case 'A':
      return padded(ctx.array_job_id.value_or(ctx.job_id), width);
    case 'a':
      return padded(ctx.array_task_id.value_or(kSlurmNoVal), width);
    case 'j':
      return padded(ctx.job_id, width);
    case 'J': {
      std::string s = padded(ctx.job_id, width);
      if (!ctx.step.empty()) s += "." + ctx.step;
      return s;
    }
    case 'n':
      return padded(ctx.node_id, width);
    case 't':
      return padded(ctx.task_id, width);
    case 'N':
      return ctx.node;
    case 's':
      return ctx.step.empty() ? std::string("batch") : ctx.step;
    case 'u':
      return ctx.user;
    case 'x':
      return ctx.job_name;
    default:
      return std::nullopt;
  }
}

std::string without_backslash_escapes(std::string_view p) {
  std::string out;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '\\') {
      if (i + 1 < p.size() && p[i + 1] == '\\') {
        out += '\\';
        ++i;
      }
      continue;
    }
    out += p[i];
  }
  return out;
}

}  // namespace

std::string expand_slurm_pattern(std::string_view pattern, const SlurmPatternContext& ctx) {
  std::string out;
  if (pattern.find('\\') != std::string_view::npos) {
    out = without_backslash_escapes(pattern);
  } else {
    for (size_t i = 0; i < pattern.size(); ++i) {
      if (pattern[i] != '%' || i + 1 >= pattern.size()) {
        out += pattern[i];
        continue;
      }
      if (pattern[i + 1] == '%') {
        out += '%';
        ++i;
        continue;
      }
      size_t j = i + 1;
      size_t width = 0;
      while (j < pattern.size() && std::isdigit(static_cast<unsigned char>(pattern[j])) != 0) {
        width = std::min(kMaxPad, width * 10 + static_cast<size_t>(pattern[j] - '0'));
        ++j;
      }
      if (j < pattern.size()) {
        if (auto v = token_value(pattern[j], width, ctx)) {
          out += *v;
          i = j;
          continue;
        }
      }
      // Not a token: keep what was written.
      out += pattern.substr(i, j - i);
      i = j - 1;
    }
  }
  if (!out.empty() && out.front() != '/' && !ctx.work_dir.empty()) {
    std::string dir = ctx.work_dir;
    if (dir.back() != '/') dir += '/';
    out.insert(0, dir);
  }
  return out;
}

std::string default_stdout_pattern(bool is_array) {
  return is_array ? "slurm-%A_%a.out" : "slurm-%j.out";
}

}  // namespace triage
