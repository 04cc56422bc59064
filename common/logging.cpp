#include "common/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace triage {

void init_logging(std::string_view program, std::string_view level) {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>(std::string(program), std::move(sink));
  // systemd's journal already stamps each line; keep ours short and greppable.
  logger->set_pattern(std::string(program) + ": %l: %v");
  logger->set_level(spdlog::level::from_str(std::string(level)));
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace triage
