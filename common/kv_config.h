// Slurm-style "Key=Value" configuration (triage.conf). Keys are case-insensitive as in slurm.conf;
// every key must be declared by the program reading the file, and an unknown key, a bad value or a
// duplicate is an error that names the file and line.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace triage {

enum class ConfigType { kString, kInt, kBool, kDuration, kEnum, kPath, kBytes };

struct ConfigKeySpec {
  std::string name;  // canonical spelling, e.g. "DrainPolicy"
  ConfigType type = ConfigType::kString;
  std::string default_value;
  std::vector<std::string> choices;  // for kEnum
  int64_t min = INT64_MIN;           // for kInt, kDuration (seconds), kBytes
  int64_t max = INT64_MAX;
  std::string help;
};

class KvConfig {
 public:
  explicit KvConfig(std::vector<ConfigKeySpec> specs);

  // What an undeclared key is. A program that owns the file (the agent owns triage.conf) rejects
  // it; a program that reads a few keys of a file another program validates (the analyzer reading
  // the TSDB keys) leaves it to the owner, while still checking the keys it declared.
  enum class UnknownKeys { kError, kIgnore };

  // Parses `text`; on any error nothing is applied. Returns every error found (not just the first).
  std::vector<InputError> parse(std::string_view text, const std::string& file,
                                UnknownKeys unknown = UnknownKeys::kError);
  std::vector<InputError> parse_file(const std::string& path,
                                     UnknownKeys unknown = UnknownKeys::kError);
  // One "Key=Value" (command-line overrides such as --set Key=Value).
  std::optional<InputError> set(std::string_view assignment, const std::string& origin);

  std::string get(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  // Durations accept "90", "90s", "5m", "2h", "1d"; returned in seconds.
  int64_t get_seconds(std::string_view key) const;
  // Sizes accept "512", "64K", "32M", "2G"; returned in bytes.
  int64_t get_bytes(std::string_view key) const;
  // Where a value came from ("file:line" or "default").
  std::string origin(std::string_view key) const;

  const std::vector<ConfigKeySpec>& specs() const { return specs_; }
  // "Key=Value" for every key, defaults included: what --check-config prints.
  std::string dump() const;

 private:
  const ConfigKeySpec* find(std::string_view key) const;
  std::optional<std::string> validate(const ConfigKeySpec& spec, std::string_view value) const;

  std::vector<ConfigKeySpec> specs_;
  std::map<std::string, std::string> values_;   // canonical name -> value
  std::map<std::string, std::string> origins_;  // canonical name -> "file:line"
};

std::optional<int64_t> parse_duration_seconds(std::string_view s);
std::optional<int64_t> parse_byte_size(std::string_view s);
std::optional<bool> parse_bool_word(std::string_view s);

}  // namespace triage
