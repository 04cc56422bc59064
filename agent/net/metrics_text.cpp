#include "agent/net/metrics_text.h"

#include <cmath>
#include <cstdio>

#include "common/text.h"

namespace triage::agent {

std::string escape_label_value(std::string_view v) {
  const std::string safe = printable(v);
  std::string out;
  out.reserve(safe.size());
  for (char c : safe) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

void MetricsText::family(std::string_view name, std::string_view type, std::string_view help) {
  if (heads_.count(name) != 0) return;
  std::string head = "# HELP ";
  head += name;
  head += ' ';
  head += help;
  head += "\n# TYPE ";
  head += name;
  head += ' ';
  head += type;
  head += '\n';
  heads_.emplace(std::string(name), std::move(head));
  order_.emplace_back(name);
}

std::string& MetricsText::body(std::string_view name) {
  auto it = bodies_.find(name);
  if (it == bodies_.end()) {
    if (heads_.count(name) == 0) order_.emplace_back(name);
    it = bodies_.emplace(std::string(name), std::string()).first;
  }
  return it->second;
}

void MetricsText::append_labels(std::string& out, const Labels& labels) {
  if (labels.empty()) return;
  out += '{';
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out += ',';
    first = false;
    out += k;
    out += "=\"";
    out += escape_label_value(v);
    out += '"';
  }
  out += '}';
}

void MetricsText::sample(std::string_view name, const Labels& l, double value) {
  std::string& out = body(name);
  out += name;
  append_labels(out, l);
  char buf[64];
  if (std::isnan(value)) {
    (void)std::snprintf(buf, sizeof buf, " NaN\n");
  } else {
    (void)std::snprintf(buf, sizeof buf, " %.17g\n", value);
  }
  out += buf;
}

void MetricsText::sample(std::string_view name, const Labels& l, uint64_t value) {
  std::string& out = body(name);
  out += name;
  append_labels(out, l);
  out += ' ';
  out += std::to_string(value);
  out += '\n';
}

std::string MetricsText::text() const {
  std::string out;
  for (const std::string& name : order_) {
    if (auto h = heads_.find(name); h != heads_.end()) out += h->second;
    if (auto b = bodies_.find(name); b != bodies_.end()) out += b->second;
  }
  return out;
}

}  // namespace triage::agent
