#include "common/error.h"

namespace triage {

std::string format_location(const std::string& file, int line, const std::string& message) {
  if (line > 0) return file + ":" + std::to_string(line) + ": " + message;
  if (!file.empty()) return file + ": " + message;
  return message;
}

InputError::InputError(std::string file, int line, std::string message)
    : std::runtime_error(format_location(file, line, message)),
      file_(std::move(file)),
      line_(line),
      message_(std::move(message)) {}

}  // namespace triage
