#include "analyzer/run_context.h"

#include <algorithm>

namespace triage {

RayInfo ray_info(const LogFacts& facts, const std::string& status, bool has_tsdb_dir) {
  RayInfo ray;
  ray.enabled = facts.ray_enabled || !facts.tunnel.command.empty();
  ray.tunnel_command = facts.tunnel.command;
  ray.tunnel_line = facts.tunnel.line;
  ray.head_host = facts.tunnel.head_host;
  ray.prometheus_port = facts.tunnel.prometheus_port;
  ray.prometheus_port_source = facts.tunnel.prometheus_port_source;
  if (ray.enabled && !ray.prometheus_port) {
    ray.prometheus_port = 9190;
    ray.prometheus_port_source = "default";
  }
  ray.live = status == kStatusRunning || status == kStatusHanging;
  ray.has_tsdb_dir = has_tsdb_dir;
  return ray;
}

std::vector<LineCopy> last_lines_shown(const std::vector<LineCopy>& tail, const std::string& status,
                                       const std::string& primary_failure,
                                       const SignatureCatalog& catalog) {
  const SignatureClass* pc = primary_failure.empty() ? nullptr : catalog.find(primary_failure);
  const bool unexplained = pc != nullptr && pc->derived == Derivation::kNoEvidence;
  if (status != kStatusUnknown && !unexplained) return {};
  const size_t n = std::min<size_t>(tail.size(), 8);
  return {tail.end() - static_cast<std::ptrdiff_t>(n), tail.end()};
}

}  // namespace triage
