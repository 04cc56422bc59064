#include "common/json_read.h"

namespace triage {

JsonObjectReader::JsonObjectReader(const nlohmann::json& j, std::string origin, std::string path)
    : j_(j), origin_(std::move(origin)), path_(std::move(path)) {
  if (!j_.is_object()) {
    throw InputError(origin_, 0,
                     (path_.empty() ? std::string("document") : path_) + ": expected an object");
  }
}

std::string JsonObjectReader::field_path(const char* key) const {
  return path_.empty() ? std::string(key) : path_ + "." + key;
}

std::string JsonObjectReader::item_path(const char* key, size_t index) const {
  return field_path(key) + "[" + std::to_string(index) + "]";
}

void JsonObjectReader::fail(const char* key, const std::string& what) const {
  throw InputError(origin_, 0, field_path(key) + ": " + what);
}

const nlohmann::json* JsonObjectReader::member(const char* key) const {
  const auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<std::string> JsonObjectReader::str(const char* key) const {
  const auto* m = member(key);
  if (m == nullptr) return std::nullopt;
  if (!m->is_string()) fail(key, "expected a string");
  return m->get<std::string>();
}

std::optional<int64_t> JsonObjectReader::i64(const char* key) const {
  const auto* m = member(key);
  if (m == nullptr) return std::nullopt;
  if (m->is_number_integer()) {
    if (m->is_number_unsigned() && m->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      fail(key, "integer out of range");
    }
    return m->get<int64_t>();
  }
  fail(key, "expected an integer");
}

std::optional<uint64_t> JsonObjectReader::u64(const char* key) const {
  const auto* m = member(key);
  if (m == nullptr) return std::nullopt;
  if (m->is_number_unsigned()) return m->get<uint64_t>();
  // Documents built in memory hold small numbers as signed integers.
  if (m->is_number_integer()) {
    if (m->get<int64_t>() >= 0) return static_cast<uint64_t>(m->get<int64_t>());
    fail(key, "expected a non-negative integer");
  }
  fail(key, "expected an integer");
}

std::optional<double> JsonObjectReader::num(const char* key) const {
  const auto* m = member(key);
  if (m == nullptr) return std::nullopt;
  if (!m->is_number()) fail(key, "expected a number");
  return m->get<double>();
}

std::optional<bool> JsonObjectReader::boolean(const char* key) const {
  const auto* m = member(key);
  if (m == nullptr) return std::nullopt;
  if (!m->is_boolean()) fail(key, "expected true or false");
  return m->get<bool>();
}

const nlohmann::json* JsonObjectReader::array(const char* key) const {
  const auto* m = member(key);
  if (m == nullptr) return nullptr;
  if (!m->is_array()) fail(key, "expected an array");
  return m;
}

const nlohmann::json* JsonObjectReader::object(const char* key) const {
  const auto* m = member(key);
  if (m == nullptr) return nullptr;
  if (!m->is_object()) fail(key, "expected an object");
  return m;
}

}  // namespace triage
