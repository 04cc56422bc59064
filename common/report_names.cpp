#include "common/report_names.h"

namespace triage {

std::string attempt_report_name(const std::string& name, int attempt) {
  const std::string tag = ".attempt" + std::to_string(attempt);
  const size_t slash = name.rfind('/');
  const size_t dot = name.rfind('.');
  // A dot in a directory name or a leading dot (".triage") is not an extension.
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  if (dot == std::string::npos || dot <= base) return name + tag;
  return name.substr(0, dot) + tag + name.substr(dot);
}

}  // namespace triage
