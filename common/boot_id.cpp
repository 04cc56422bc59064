#include "common/boot_id.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

#include "common/safe_io.h"
#include "common/text.h"

namespace triage {

std::string normalize_boot_id(std::string_view s) {
  std::string out;
  for (const char c : trim(s)) {
    if (c == '-') continue;
    const char l = (c >= 'A' && c <= 'F') ? static_cast<char>(c - 'A' + 'a') : c;
    if (!((l >= '0' && l <= '9') || (l >= 'a' && l <= 'f'))) return "";
    out.push_back(l);
  }
  return out.size() == 32 ? out : "";
}

std::string read_boot_id(const std::string& path) {
  // procfs files report size 0, so read them directly rather than through open_regular_file's
  // size-based helpers.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd) throw_errno("open " + path, errno);
  const std::string text = read_fd_limited(fd.get(), 256);
  std::string id = normalize_boot_id(text);
  if (id.empty()) throw std::runtime_error(path + ": not a boot id: '" + printable(text) + "'");
  return id;
}

}  // namespace triage
