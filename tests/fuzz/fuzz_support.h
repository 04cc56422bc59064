// Shared bits of the fuzz targets: the input as a string_view, and a memfd holding it for the
// readers that want a file descriptor.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/safe_io.h"

namespace triage::fuzz {

inline std::string_view as_view(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// An anonymous file with `bytes` in it, positioned at its start. Aborts when the kernel refuses:
// that is a harness failure, not a finding.
inline UniqueFd memfd_with(std::string_view bytes) {
  UniqueFd fd(memfd_create("fuzz-input", MFD_CLOEXEC));
  if (!fd) std::abort();
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  if (::lseek(fd.get(), 0, SEEK_SET) != 0) std::abort();
  return fd;
}

// The shipped rule catalogs of the source tree.
inline std::string source_rules_dir() {
  return std::string(TRIAGE_SOURCE_DIR) + "/rules";
}

}  // namespace triage::fuzz
