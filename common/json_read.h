// Strict, path-aware reading of JSON objects from untrusted sources: every type mismatch is an
// InputError naming the field ("nodes[2].tasks[0].pid: expected an integer").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace triage {

class JsonObjectReader {
 public:
  // Throws InputError unless `j` is an object.
  JsonObjectReader(const nlohmann::json& j, std::string origin, std::string path);

  std::optional<std::string> str(const char* key) const;
  std::optional<int64_t> i64(const char* key) const;
  std::optional<uint64_t> u64(const char* key) const;
  std::optional<double> num(const char* key) const;
  std::optional<bool> boolean(const char* key) const;
  // The member if present (any type), else nullptr.
  const nlohmann::json* member(const char* key) const;
  // The member if present and an array, else nullptr; throws if present with another type.
  const nlohmann::json* array(const char* key) const;
  const nlohmann::json* object(const char* key) const;

  std::string field_path(const char* key) const;
  std::string item_path(const char* key, size_t index) const;
  [[noreturn]] void fail(const char* key, const std::string& what) const;
  const std::string& origin() const { return origin_; }

 private:
  const nlohmann::json& j_;
  std::string origin_;
  std::string path_;
};

}  // namespace triage
