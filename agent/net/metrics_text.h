// Prometheus text exposition format (version 0.0.4): HELP and TYPE once per family, then samples
// with escaped label values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace triage::agent {

class MetricsText {
 public:
  using Labels = std::map<std::string, std::string>;

  // Declares a family ("counter" or "gauge"); repeated declarations are ignored. Samples are
  // grouped under their family in the output whatever order they were added in.
  void family(std::string_view name, std::string_view type, std::string_view help);
  void sample(std::string_view name, const Labels& labels, double value);
  void sample(std::string_view name, const Labels& labels, uint64_t value);

  std::string text() const;

 private:
  std::string& body(std::string_view name);
  static void append_labels(std::string& out, const Labels& labels);

  std::vector<std::string> order_;
  std::map<std::string, std::string, std::less<>> heads_;
  std::map<std::string, std::string, std::less<>> bodies_;
};

std::string escape_label_value(std::string_view v);

}  // namespace triage::agent
