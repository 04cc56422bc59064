#include "analyzer/finding_render.h"

#include <vector>

#include "common/text.h"
#include "common/time_util.h"

namespace triage {

namespace {

constexpr size_t kShortQuote = 240;

std::string source_md(const Finding& f) {
  if (f.source == "log") return "line " + std::to_string(f.line);
  if (f.source.rfind("kernel:", 0) == 0)
    return "kernel log of " + md_prose(f.source.substr(7)) + " (trusted)";
  if (f.source.rfind("tasks:", 0) == 0)
    return "task exits on " + md_prose(f.source.substr(6)) + " (trusted)";
  if (f.source == "slurm") return "Slurm (trusted)";
  return md_code_span(f.source) + (f.line > 0 ? " line " + std::to_string(f.line) : "");
}

}  // namespace

std::string finding_where_md(const Finding& f) {
  std::string s = source_md(f);
  std::vector<std::string> extra;
  if (f.rank >= 0) extra.push_back("task " + std::to_string(f.rank));
  if (!f.host.empty() && f.source == "log") extra.push_back("host " + md_prose(f.host));
  if (f.time_usec > 0) extra.push_back(format_utc(f.time_usec));
  if (!extra.empty()) {
    s += " (";
    for (size_t i = 0; i < extra.size(); ++i)
      s += (i > 0 ? ", " : "") + extra[i];
    s += ")";
  }
  return s;
}

std::string finding_quote(const Finding& f) {
  std::string text = strip_ansi(f.text);
  if (f.truncated) text += " [...]";
  return text;
}

std::string finding_short_quote_md(const Finding& f) {
  const std::string clean = strip_ansi(f.text);
  std::string s(truncate_utf8(clean, kShortQuote));
  if (s.size() < clean.size()) s += " [...]";
  return md_code_span(s);
}

std::string finding_timed_text(const Finding& f) {
  return f.time_usec > 0 ? format_utc(f.time_usec) + " — " + f.text : f.text;
}

nlohmann::ordered_json finding_json(const Finding& f) {
  using json = nlohmann::ordered_json;
  json j = json::object();
  j["class"] = f.cls;
  j["source"] = f.source;
  j["line"] = f.line;
  j["text"] = f.text;
  j["truncated"] = f.truncated;
  j["trusted"] = f.trusted;
  j["rank"] = f.rank >= 0 ? json(f.rank) : json(nullptr);
  j["host"] = f.host.empty() ? json(nullptr) : json(f.host);
  j["time"] =
      f.time_usec > 0 ? json(format_utc(f.time_usec, f.time_usec % 1000000 != 0)) : json(nullptr);
  j["stage"] = f.stage.empty() ? json(nullptr) : json(f.stage);
  if (!f.captures.empty()) {
    json c = json::object();
    for (const auto& [k, v] : f.captures)
      c[k] = v;
    j["captures"] = c;
  }
  if (f.traceback_line > 0) j["traceback_line"] = f.traceback_line;
  if (f.severity) {
    j["severity"] = std::string(to_string(*f.severity));
    j["hosts"] = f.hosts;
  }
  return j;
}

}  // namespace triage
