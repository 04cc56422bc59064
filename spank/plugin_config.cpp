#include "spank/plugin_config.h"

#include <cstdio>
#include <cstring>

#include "spank/slice.h"

namespace triage::spank {

std::string_view to_string(Mode m) noexcept {
  switch (m) {
    case Mode::kOff:
      return "off";
    case Mode::kBasic:
      return "basic";
    case Mode::kFull:
      return "full";
  }
  return "basic";
}

bool parse_mode(const char* value, Mode* out) noexcept {
  const std::string_view v = value == nullptr ? std::string_view() : std::string_view(value);
  if (v.empty() || v == "(null)" || v == "full") {
    *out = Mode::kFull;
  } else if (v == "basic") {
    *out = Mode::kBasic;
  } else if (v == "off") {
    *out = Mode::kOff;
  } else {
    return false;
  }
  return true;
}

std::string_view to_string(HangAction a) noexcept {
  switch (a) {
    case HangAction::kNotify:
      return "notify";
    case HangAction::kCancel:
      return "cancel";
    case HangAction::kRequeue:
      return "requeue";
  }
  return "notify";
}

bool parse_hang_action(const char* value, HangAction* out) noexcept {
  const std::string_view v = value == nullptr ? std::string_view() : std::string_view(value);
  if (v == "notify") {
    *out = HangAction::kNotify;
  } else if (v == "cancel") {
    *out = HangAction::kCancel;
  } else if (v == "requeue") {
    *out = HangAction::kRequeue;
  } else {
    return false;
  }
  return true;
}

bool parse_requeue_count(const char* value, int* out) noexcept {
  const std::string_view v = value == nullptr ? std::string_view() : std::string_view(value);
  if (v.empty() || v == "(null)") {
    *out = 1;
    return true;
  }
  if (v.size() > 2) return false;
  int n = 0;
  for (const char c : v) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + (c - '0');
  }
  if (n > kMaxRequeues) return false;
  *out = n;
  return true;
}

namespace {

void copy_path(std::string_view from, char (&to)[kMaxPathBytes]) noexcept {
  std::memcpy(to, from.data(), from.size());
  to[from.size()] = '\0';
}

void report(ConfigErrorSink sink, void* ctx, std::string_view arg, const char* problem) noexcept {
  if (sink == nullptr) return;
  char msg[512];
  // Arguments are echoed bounded: the admin needs to recognise them, not read them whole.
  const int shown = static_cast<int>(arg.size() > 200 ? 200 : arg.size());
  (void)std::snprintf(msg, sizeof(msg), "'%.*s': %s", shown, arg.data(), problem);
  sink(msg, ctx);
}

bool parse_timeout(std::string_view v, int* out) noexcept {
  if (v.empty() || v.size() > 4) return false;
  int n = 0;
  for (const char c : v) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + (c - '0');
  }
  if (n < 1 || n > 1000) return false;
  *out = n;
  return true;
}

}  // namespace

bool expand_node_pattern(const char* pattern, const char* node, char* out, size_t len) noexcept {
  size_t n = 0;
  auto put = [&](char c) {
    if (n + 1 >= len) return false;
    out[n++] = c;
    return true;
  };
  bool ok = len > 0;
  for (const char* p = pattern; ok && *p != '\0'; ++p) {
    if (p[0] == '%' && p[1] == 'n') {
      for (const char* q = node; ok && *q != '\0'; ++q)
        ok = put(*q == '/' ? '_' : *q);
      ++p;
    } else if (p[0] == '%' && p[1] == '%') {
      ok = put('%');
      ++p;
    } else {
      ok = put(*p);
    }
  }
  if (len > 0) out[ok ? n : 0] = '\0';
  return ok;
}

void config_for_node(const PluginConfig& cfg, const char* node, PluginConfig* out) noexcept {
  *out = cfg;
  expand_node_pattern(cfg.socket_path, node, out->socket_path, sizeof(out->socket_path));
  expand_node_pattern(cfg.inbox_dir, node, out->inbox_dir, sizeof(out->inbox_dir));
}

int parse_plugin_args(int argc, const char* const* argv, PluginConfig* cfg, ConfigErrorSink sink,
                      void* sink_ctx) noexcept {
  copy_path(kDefaultSocket, cfg->socket_path);
  copy_path(kDefaultInbox, cfg->inbox_dir);
  cfg->default_mode = Mode::kBasic;
  cfg->timeout_ms = kDefaultTimeoutMs;
  cfg->hang_action_allowed = false;
  cfg->requeue_allowed = false;
  cfg->preflight = false;

  int rejected = 0;
  for (int i = 0; i < argc; ++i) {
    const std::string_view arg = argv[i] == nullptr ? std::string_view() : argv[i];
    const size_t eq = arg.find('=');
    const std::string_view key = slice(arg, 0, eq);
    const std::string_view value =
        eq == std::string_view::npos ? std::string_view() : slice(arg, eq + 1);
    if (eq == std::string_view::npos) {
      report(sink, sink_ctx, arg, "not key=value; ignored");
      ++rejected;
    } else if (key == "default") {
      Mode m = Mode::kBasic;
      // A bare "default=" is a typo, not a request for "full".
      if (value.empty() || value == "(null)" || !parse_mode(argv[i] + eq + 1, &m)) {
        report(sink, sink_ctx, arg, "default must be off, basic or full; using basic");
        ++rejected;
      } else {
        cfg->default_mode = m;
      }
    } else if (key == "socket" || key == "inbox") {
      if (value.empty() || value.front() != '/' || value.size() >= kMaxPathBytes) {
        report(sink, sink_ctx, arg, "expected an absolute path; using the default");
        ++rejected;
      } else if (key == "socket") {
        copy_path(value, cfg->socket_path);
      } else {
        copy_path(value, cfg->inbox_dir);
      }
    } else if (key == "timeout_ms") {
      if (!parse_timeout(value, &cfg->timeout_ms)) {
        report(sink, sink_ctx, arg, "timeout_ms must be 1..1000; using 10");
        ++rejected;
      }
    } else if (key == "hang_action") {
      if (value == "allow" || value == "notify") {
        cfg->hang_action_allowed = value == "allow";
      } else {
        report(sink, sink_ctx, arg, "hang_action must be allow or notify; using notify");
        cfg->hang_action_allowed = false;
        ++rejected;
      }
    } else if (key == "requeue") {
      if (value == "allow" || value == "refuse") {
        cfg->requeue_allowed = value == "allow";
      } else {
        report(sink, sink_ctx, arg, "requeue must be allow or refuse; using refuse");
        cfg->requeue_allowed = false;
        ++rejected;
      }
    } else if (key == "preflight") {
      if (value == "on" || value == "off") {
        cfg->preflight = value == "on";
      } else {
        // Never on by mistake: a node that fails prologs is drained.
        report(sink, sink_ctx, arg, "preflight must be on or off; using off");
        cfg->preflight = false;
        ++rejected;
      }
    } else {
      report(sink, sink_ctx, arg,
             "unknown argument (expected default=, socket=, inbox=, timeout_ms=, hang_action=, "
             "requeue= or preflight=); ignored");
      ++rejected;
    }
  }
  return rejected;
}

}  // namespace triage::spank
