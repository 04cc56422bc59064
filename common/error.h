// Errors that point at the input that caused them.
#pragma once

#include <stdexcept>
#include <string>

namespace triage {

// A problem in an input file or stream, located as precisely as we can ("file:line: message").
// Line 0 means "the whole input" and is left out of the rendering.
class InputError : public std::runtime_error {
 public:
  InputError(std::string file, int line, std::string message);

  const std::string& file() const { return file_; }
  int line() const { return line_; }
  const std::string& message() const { return message_; }

 private:
  std::string file_;
  int line_;
  std::string message_;
};

std::string format_location(const std::string& file, int line, const std::string& message);

}  // namespace triage
