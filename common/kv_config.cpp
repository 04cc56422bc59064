#include "common/kv_config.h"

#include <fstream>
#include <set>
#include <sstream>

#include "common/text.h"

namespace triage {

std::optional<int64_t> parse_duration_seconds(std::string_view s) {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  int64_t mult = 1;
  const char last = s.back();
  if (last == 's' || last == 'm' || last == 'h' || last == 'd') {
    mult = last == 's' ? 1 : last == 'm' ? 60 : last == 'h' ? 3600 : 86400;
    s.remove_suffix(1);
  }
  const auto v = parse_int(s);
  if (!v || *v < 0 || *v > INT64_MAX / mult) return std::nullopt;
  return *v * mult;
}

std::optional<int64_t> parse_byte_size(std::string_view s) {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  int64_t mult = 1;
  const char last = static_cast<char>(s.back() | 0x20);
  if (last == 'k' || last == 'm' || last == 'g' || last == 't') {
    mult = last == 'k'   ? (1LL << 10)
           : last == 'm' ? (1LL << 20)
           : last == 'g' ? (1LL << 30)
                         : (1LL << 40);
    s.remove_suffix(1);
  }
  const auto v = parse_int(s);
  if (!v || *v < 0 || *v > INT64_MAX / mult) return std::nullopt;
  return *v * mult;
}

std::optional<bool> parse_bool_word(std::string_view s) {
  const std::string l = to_lower(trim(s));
  if (l == "yes" || l == "true" || l == "1" || l == "on") return true;
  if (l == "no" || l == "false" || l == "0" || l == "off") return false;
  return std::nullopt;
}

KvConfig::KvConfig(std::vector<ConfigKeySpec> specs) : specs_(std::move(specs)) {
  for (const auto& s : specs_) {
    values_[s.name] = s.default_value;
    origins_[s.name] = "default";
  }
}

const ConfigKeySpec* KvConfig::find(std::string_view key) const {
  for (const auto& s : specs_) {
    if (iequals(s.name, key)) return &s;
  }
  return nullptr;
}

std::optional<std::string> KvConfig::validate(const ConfigKeySpec& spec,
                                              std::string_view value) const {
  switch (spec.type) {
    case ConfigType::kString:
    case ConfigType::kPath:
      if (spec.type == ConfigType::kPath && !value.empty() && value.front() != '/') {
        return "must be an absolute path";
      }
      return std::nullopt;
    case ConfigType::kInt: {
      const auto v = parse_int(value);
      if (!v) return "must be a whole number";
      if (*v < spec.min || *v > spec.max) {
        return "must be between " + std::to_string(spec.min) + " and " + std::to_string(spec.max);
      }
      return std::nullopt;
    }
    case ConfigType::kBool:
      if (!parse_bool_word(value)) return "must be yes or no";
      return std::nullopt;
    case ConfigType::kDuration: {
      const auto v = parse_duration_seconds(value);
      if (!v) return "must be a duration such as 30s, 5m, 2h";
      if (*v < spec.min || *v > spec.max) return "is out of range";
      return std::nullopt;
    }
    case ConfigType::kBytes: {
      const auto v = parse_byte_size(value);
      if (!v) return "must be a size such as 512M or 2G";
      if (*v < spec.min || *v > spec.max) return "is out of range";
      return std::nullopt;
    }
    case ConfigType::kEnum:
      for (const auto& c : spec.choices) {
        if (iequals(c, value)) return std::nullopt;
      }
      {
        std::string list;
        for (const auto& c : spec.choices)
          list += (list.empty() ? "" : ", ") + c;
        return "must be one of: " + list;
      }
  }
  return std::nullopt;
}

std::vector<InputError> KvConfig::parse(std::string_view text, const std::string& file,
                                        UnknownKeys unknown) {
  std::vector<InputError> errors;
  std::map<std::string, std::string> staged;
  std::map<std::string, std::string> staged_origin;
  std::set<std::string> seen;
  int lineno = 0;
  for (std::string_view raw : split(text, '\n')) {
    ++lineno;
    if (!is_valid_utf8(raw)) {
      errors.emplace_back(file, lineno, "line is not valid UTF-8");
      continue;
    }
    // A '#' starts a comment, as in slurm.conf.
    if (const size_t hash = raw.find('#'); hash != std::string_view::npos)
      raw = raw.substr(0, hash);
    const std::string_view line = trim(raw);
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      errors.emplace_back(file, lineno, "expected Key=Value, got '" + printable(line) + "'");
      continue;
    }
    const std::string_view key = trim(line.substr(0, eq));
    std::string_view value = trim(line.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    const ConfigKeySpec* spec = find(key);
    if (spec == nullptr) {
      if (unknown == UnknownKeys::kError)
        errors.emplace_back(file, lineno, "unknown key '" + printable(key) + "'");
      continue;
    }
    if (!seen.insert(spec->name).second) {
      errors.emplace_back(file, lineno, spec->name + " is set twice");
      continue;
    }
    if (auto problem = validate(*spec, value)) {
      errors.emplace_back(file, lineno, spec->name + " " + *problem);
      continue;
    }
    staged[spec->name] = std::string(value);
    staged_origin[spec->name] = file + ":" + std::to_string(lineno);
  }
  if (errors.empty()) {
    for (auto& [k, v] : staged)
      values_[k] = std::move(v);
    for (auto& [k, v] : staged_origin)
      origins_[k] = std::move(v);
  }
  return errors;
}

std::vector<InputError> KvConfig::parse_file(const std::string& path, UnknownKeys unknown) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {InputError(path, 0, "cannot open configuration file")};
  std::string text;
  text.resize((1u << 20) + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > (1u << 20))
    return {InputError(path, 0, "configuration file is larger than 1 MiB")};
  return parse(text, path, unknown);
}

std::optional<InputError> KvConfig::set(std::string_view assignment, const std::string& origin) {
  const size_t eq = assignment.find('=');
  if (eq == std::string_view::npos) return InputError(origin, 0, "expected Key=Value");
  const std::string_view key = trim(assignment.substr(0, eq));
  const std::string_view value = trim(assignment.substr(eq + 1));
  const ConfigKeySpec* spec = find(key);
  if (spec == nullptr) return InputError(origin, 0, "unknown key '" + printable(key) + "'");
  if (auto problem = validate(*spec, value))
    return InputError(origin, 0, spec->name + " " + *problem);
  values_[spec->name] = std::string(value);
  origins_[spec->name] = origin;
  return std::nullopt;
}

std::string KvConfig::get(std::string_view key) const {
  const ConfigKeySpec* spec = find(key);
  if (spec == nullptr) throw std::logic_error("undeclared configuration key " + std::string(key));
  return values_.at(spec->name);
}

int64_t KvConfig::get_int(std::string_view key) const {
  return parse_int(get(key)).value_or(0);
}
int64_t KvConfig::get_seconds(std::string_view key) const {
  return parse_duration_seconds(get(key)).value_or(0);
}
int64_t KvConfig::get_bytes(std::string_view key) const {
  return parse_byte_size(get(key)).value_or(0);
}

std::string KvConfig::origin(std::string_view key) const {
  const ConfigKeySpec* spec = find(key);
  if (spec == nullptr) return {};
  return origins_.at(spec->name);
}

std::string KvConfig::dump() const {
  std::ostringstream out;
  for (const auto& s : specs_)
    out << s.name << "=" << values_.at(s.name) << "\n";
  return out.str();
}

}  // namespace triage
