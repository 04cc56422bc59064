#include "common/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdint>
#include <memory>
#include <string>

#include "common/text.h"

namespace triage {

namespace {

// The message through log_text(): whatever text a message quotes (a job's log line, a path, another
// program's stderr), it cannot end our line early, rewrite it or forge the next one. Call sites
// that quote untrusted text escape it themselves too (and cut it short); this is the net under
// the ones that do not.
class EscapedMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm& /*time*/,
              spdlog::memory_buf_t& dest) override {
    const std::string s =
        log_text(std::string_view(msg.payload.data(), msg.payload.size()), SIZE_MAX);
    dest.append(s.data(), s.data() + s.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<EscapedMessage>();
  }
};

}  // namespace

void init_logging(std::string_view program, std::string_view level) {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>(std::string(program), std::move(sink));
  // systemd's journal already stamps each line; keep ours short and greppable.
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<EscapedMessage>('*').set_pattern(std::string(program) + ": %l: %*");
  logger->set_formatter(std::move(formatter));
  logger->set_level(spdlog::level::from_str(std::string(level)));
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace triage
