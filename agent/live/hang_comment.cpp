#include "agent/live/hang_comment.h"

#include "common/time_util.h"

namespace triage::agent {

std::string hang_comment_summary(int64_t flagged_usec, int64_t step) {
  std::string s = "triage=hang;flagged=" + format_utc(flagged_usec);
  if (step >= 0) s += ";step=" + std::to_string(step);
  return s;
}

}  // namespace triage::agent
