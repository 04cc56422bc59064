#include "common/cli_args.h"

#include "common/text.h"

namespace triage {

bool ArgCursor::next() {
  if (i_ + 1 >= argc_) return false;
  arg_ = argv_[++i_];
  return true;
}

std::string ArgCursor::value() {
  if (i_ + 1 >= argc_) throw UsageError(arg_ + " needs a value");
  return argv_[++i_];
}

int64_t ArgCursor::epoch_seconds() {
  const std::string option = arg_;
  const auto v = parse_int(value());
  if (!v || *v < 0 || *v > 32503680000)
    throw UsageError(option + " expects seconds since the epoch");
  return *v;
}

double ArgCursor::positive(double max) {
  const std::string option = arg_;
  const auto v = parse_double(value());
  if (!v || !(*v > 0) || *v > max) throw UsageError(option + " expects a positive number");
  return *v;
}

int64_t ArgCursor::whole(int64_t lo, int64_t hi) {
  const std::string option = arg_;
  const auto v = parse_int(value());
  if (!v || *v < lo || *v > hi)
    throw UsageError(option + " expects a whole number from " + std::to_string(lo) + " to " +
                     std::to_string(hi));
  return *v;
}

}  // namespace triage
