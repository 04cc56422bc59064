#include "collector/kernel_pipeline.h"

namespace triage::collector {

std::string_view KernelRecord::message() const {
  const std::string_view t = text;
  return message_offset <= t.size() ? t.substr(message_offset) : std::string_view{};
}

std::string event_id_for(const KernelRecord& r) {
  switch (r.seq_space) {
    case SeqSpace::kKmsg:
      return (r.boot_id.empty() ? std::string("kmsg") : r.boot_id) + ":" + std::to_string(r.seq);
    case SeqSpace::kJournal:
      return (r.boot_id.empty() ? std::string("journal") : r.boot_id) + ":j" + r.seq_scope + "-" +
             std::to_string(r.seq);
    case SeqSpace::kText:
      break;
  }
  return "text:" + std::to_string(r.seq);
}

bool is_gpu_error(const KernelEvent& e) {
  return e.kind.rfind("gpu-", 0) == 0 || e.kind == "nvidia-xid";
}

}  // namespace triage::collector
