#include "analyzer/blame_decision.h"

#include <algorithm>
#include <vector>

#include "analyzer/line_text.h"
#include "analyzer/vocabulary.h"
#include "common/text.h"

namespace triage {

namespace {

constexpr size_t kQuoteBytes = 160;

// A line as the reader wants it: no colours, no srun task label, no final period (the sentence
// adds its own), bounded.
std::string quote(const Finding& f) {
  std::string clean = strip_ansi(f.text);
  const std::string label = std::to_string(f.rank) + ": ";
  if (f.rank >= 0 && clean.rfind(label, 0) == 0) clean.erase(0, label.size());
  while (!clean.empty() && (clean.back() == '.' || clean.back() == ' '))
    clean.pop_back();
  std::string q(truncate_utf8(clean, kQuoteBytes));
  if (q.size() < clean.size()) q += " [...]";
  return q;
}

std::string capture(const Finding& f, const std::string& key) {
  for (const auto& [k, v] : f.captures) {
    if (k == key) return v;
  }
  return "";
}

// A node whose agent (trusted) recommends draining it: its kernel saw hardware fail during the job.
const NodeRow* drained_node(const std::vector<NodeRow>& nodes) {
  const auto it = std::find_if(nodes.begin(), nodes.end(), [](const NodeRow& n) {
    return n.from_agent && n.verdict == "drain-recommended";
  });
  return it == nodes.end() ? nullptr : &*it;
}

// Hardware failing under the job explains what the log blames on the program (a CUDA error, a
// crash) or cannot explain; it does not excuse what the job asked for (memory, time) or read.
bool hardware_overrides(Blame b) {
  return b == Blame::kUnknown || b == Blame::kPlatform || b == Blame::kUserCode;
}

const Finding* kernel_oom(const std::vector<Finding>& evidence) {
  const auto it = std::find_if(evidence.begin(), evidence.end(), [](const Finding& f) {
    return f.trusted && capture(f, "kind") == "oom-kill";
  });
  return it == evidence.end() ? nullptr : &*it;
}

std::string source_words(const Finding& f) {
  if (f.source == "log") return "log line " + std::to_string(f.line);
  if (f.source.rfind("kernel:", 0) == 0) return "kernel of " + f.source.substr(7);
  if (f.source.rfind("tasks:", 0) == 0) return "task exits on " + f.source.substr(6);
  if (f.source == "slurm") return "Slurm";
  return f.source + (f.line > 0 ? " line " + std::to_string(f.line) : "");
}

// The finding that names the failure best: trusted evidence first; for a traceback, the exception
// line that ends it; else the line a traceback of another class ends in; else the first line.
const Finding* deciding_finding(const std::vector<Finding>& evidence, bool traceback_class) {
  if (evidence.empty()) return nullptr;
  for (const Finding& f : evidence) {
    if (f.trusted) return &f;
  }
  if (traceback_class) return &evidence.back();
  for (auto it = evidence.rbegin(); it != evidence.rend(); ++it) {
    if (it->traceback_line > 0) return &*it;
  }
  return &evidence.front();
}

// The class's first `blame-when` that the log's own words in its evidence match, with the line:
// refinements in the order the rules give them, each tried on every evidence line.
std::optional<BlameVerdict> refined_by_log(const SignatureClass& c,
                                           const std::vector<Finding>& evidence) {
  for (const BlameRefinement& r : c.blame_when) {
    for (const Finding& f : evidence) {
      if (f.trusted) continue;
      const std::string clean = strip_ansi(f.text);
      if (!pattern_matches(r.pattern, split_line(clean).text)) continue;
      return BlameVerdict{r.blame, source_words(f) + ": " + quote(f), false, quote(f)};
    }
  }
  return std::nullopt;
}

// The blame the error's own vocabulary gives the token that named the failure (the first evidence
// line a vocabulary entry with a `blame` named), with the line.
std::optional<BlameVerdict> named_by_vocabulary(const SignatureCatalog& catalog,
                                                const std::string& cls,
                                                const std::vector<Finding>& evidence) {
  for (const Finding& f : evidence) {
    if (f.trusted || f.vocabulary.empty() || f.cls != cls) continue;
    for (const VocabEntry& e : catalog.vocabulary().entries) {
      if (e.id != f.vocabulary || !e.has_blame) continue;
      return BlameVerdict{e.blame, source_words(f) + ": " + quote(f), false, quote(f)};
    }
  }
  return std::nullopt;
}

// Whether `path` (a traceback frame's file) is installed Python code: a package under
// site-packages or dist-packages, the standard library under lib/pythonX (Lib\ on Windows), or
// frozen or generated code ("<frozen runpy>", "<string>"); anything else is the job's own.
bool installed_code(std::string_view path) {
  return path.empty() || path.front() == '<' ||
         path.find("site-packages") != std::string_view::npos ||
         path.find("dist-packages") != std::string_view::npos ||
         path.find("/lib/python") != std::string_view::npos ||
         path.find("\\Lib\\") != std::string_view::npos ||
         path.find("\\lib\\python") != std::string_view::npos;
}

// Whether an exception line's type is a built-in one ("KeyError: 'x'", not
// "safetensors_rust.SafetensorError: ..."): Python prints other types with their module, and a
// package's type raised under the job's frame came from the package's compiled code.
// A bare type with no message ("KeyboardInterrupt") is not taken: the interrupt or the stop came
// from outside whichever frame it was raised in.
bool builtin_exception(std::string_view line) {
  ExceptionLine exc;
  if (!parse_exception_line(line, exc) || !exc.module.empty()) return false;
  const size_t after = exc.at + exc.type.size();
  return after < line.size() && line[after] == ':';
}

// An exception the job's own code raised (its traceback's innermost frame is in the job's own
// file, not in an installed package, and its type is a built-in one) is the user's code; one a
// package raised says nothing of whose fault it was (a wrong argument, bad data or a bug in the
// package look the same).
std::optional<BlameVerdict> raised_by_job_code(const std::vector<Finding>& evidence) {
  if (evidence.empty()) return std::nullopt;
  const Finding& f = evidence.back();
  const std::string path = capture(f, "raised-in");
  if (path.empty() || installed_code(path) ||
      !builtin_exception(split_line(strip_ansi(f.text)).text))
    return std::nullopt;
  return BlameVerdict{
      Blame::kUserCode,
      source_words(f) + ", raised in " + path + " (the job's own code): " + quote(f), false,
      quote(f)};
}

// The primary class's trusted node evidence (its kernel-event kinds, seen by a node's kernel or
// agent during the job), when the class says whose fault that makes it.
const Finding* kernel_evidence(const std::vector<Finding>& evidence, const std::string& cls) {
  const auto it = std::find_if(evidence.begin(), evidence.end(), [&](const Finding& f) {
    return f.trusted && f.cls == cls && f.source.rfind("kernel:", 0) == 0;
  });
  return it == evidence.end() ? nullptr : &*it;
}

// "port mlx5_0/1 is down (...) on gpu-a017 (its agent, during the job)"
std::string kernel_basis(const Finding& f) {
  std::string what = capture(f, "summary");
  if (what.empty()) what = capture(f, "kind");
  const std::string port = capture(f, "port");
  if (!port.empty() && what.find(port) == std::string::npos) what += " (port " + port + ")";
  return what + " on " + f.host + " (its agent, during the job)";
}

std::string hardware_basis(const NodeRow& n) {
  const std::string why =
      n.verdict_reasons.empty() ? std::string("drain recommended") : n.verdict_reasons.front();
  return why + " on " + n.host + " (its kernel, during the job)";
}

}  // namespace

BlameVerdict decide_blame(const Triage& t, const SignatureCatalog& catalog) {
  if (t.primary_failure.empty()) {
    if (t.status == kStatusCompleted || t.status == kStatusRunning) return {};
    return {Blame::kUnknown, "no failure class was identified", false, ""};
  }
  const SignatureClass* c = catalog.find(t.primary_failure);
  const Blame fallback = c != nullptr ? c->blame : Blame::kUnknown;
  // The log's own words (a missing file, a known cause) refine the class's default; what a node
  // saw, being trusted, still comes first.
  // The class's `blame-when` words first (written for the class), then what the token's
  // vocabulary says of it.
  std::optional<BlameVerdict> by_log = c != nullptr ? refined_by_log(*c, t.evidence) : std::nullopt;
  if (!by_log) by_log = named_by_vocabulary(catalog, t.primary_failure, t.evidence);
  if (!by_log && c != nullptr && c == catalog.traceback_class())
    by_log = raised_by_job_code(t.evidence);
  const Blame said = by_log ? *by_log->blame : fallback;
  if (const NodeRow* n = drained_node(t.nodes); n != nullptr && hardware_overrides(said))
    return {Blame::kPlatform, hardware_basis(*n), true, ""};
  if (c != nullptr && c->kernel_blame) {
    if (const Finding* k = kernel_evidence(t.evidence, c->id))
      return {*c->kernel_blame, kernel_basis(*k), true, quote(*k)};
  }
  if (const Finding* oom = kernel_oom(t.evidence)) {
    const std::string constraint = capture(*oom, "constraint");
    if (constraint == "CONSTRAINT_MEMCG") {
      return {Blame::kUserConfig,
              "the kernel OOM killer acted inside the job's own memory limit on " + oom->host, true,
              quote(*oom)};
    }
    if (constraint == "CONSTRAINT_NONE") {
      return {Blame::kPlatform,
              "the whole node " + oom->host + " ran out of memory, not the job's own limit", true,
              quote(*oom)};
    }
  }
  // A stall or a death without evidence is named by what is missing; its line (the last step)
  // says nothing of whose fault it was.
  if (c != nullptr && (c->derived == Derivation::kStall || c->derived == Derivation::kNoEvidence))
    return {fallback, "nothing in the log or on the nodes names a cause", false, ""};
  if (by_log) return *by_log;
  const Finding* f = deciding_finding(t.evidence, c != nullptr && c == catalog.traceback_class());
  if (f == nullptr) return {fallback, "the class's default (no evidence line)", false, ""};
  return {fallback, source_words(*f) + ": " + quote(*f), f->trusted, quote(*f)};
}

std::string blame_summary(const Triage& t, const BlameVerdict& v) {
  if (!v.blame) return "";
  // Trusted evidence is shown as the basis says it; the log's word as its own line.
  const std::string shown = v.trusted || v.line.empty() ? v.basis : v.line;
  const std::string title =
      t.primary_title.empty() ? std::string("nothing names the failure") : t.primary_title;
  const NodeRow* drained = drained_node(t.nodes);
  const std::string drain =
      drained != nullptr ? " " + drained->host + " is recommended for drain." : std::string();
  switch (*v.blame) {
    case Blame::kPlatform:
      if (drained != nullptr)
        return "Not your code: " + hardware_basis(*drained) + ". Resubmit;" + drain;
      return "Not your code: " + title + " (" + shown + "). Resubmit.";
    case Blame::kScheduler:
      return "Not your code: " + title + " (" + shown + "). Resubmit.";
    case Blame::kUserCode:
      return "Your code: " + shown + ".";
    case Blame::kUserConfig:
      return "Your job's settings: " + title + " (" + shown + ").";
    case Blame::kInputData:
      return "Your input data: " + title + " (" + shown + ").";
    case Blame::kUnknown:
      break;
  }
  return "Whose fault is not clear: " + title + " (" + shown + ")." + drain;
}

}  // namespace triage
