// File access that cannot be steered by whoever controls the path: every open is relative to a
// directory fd, refuses symlinks where asked, never blocks on FIFOs or devices, and every write
// goes to a temporary file renamed into place.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace triage {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  ~UniqueFd();

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() {
    const int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// A std::system_error whose message names the path and the operation ("open /x/log: Permission
// denied").
[[noreturn]] void throw_errno(const std::string& what, int err);

// Opens a directory. With `nofollow`, a symlink in the final component is refused (ELOOP/ENOTDIR).
UniqueFd open_dir(const std::string& path, bool nofollow = true);
UniqueFd open_dir_at(int dirfd, const std::string& name, bool nofollow = true);

struct DirEntry {
  std::string name;
  unsigned char type = 0;  // dirent's d_type: DT_REG, DT_DIR, DT_LNK, ... or DT_UNKNOWN
};

// The entries of the directory open as `dirfd`, without "." and "..", sorted by name. It reads
// through its own descriptor (`dirfd`'s offset is untouched) and stops after `max_entries`
// directory entries ("." and ".." count), setting `*capped`. Throws std::system_error when the
// directory cannot be read.
std::vector<DirEntry> list_dir_at(int dirfd, size_t max_entries = SIZE_MAX, bool* capped = nullptr);
// The same for a path; a symlink to a directory is followed.
std::vector<DirEntry> list_dir(const std::string& path, size_t max_entries = SIZE_MAX,
                               bool* capped = nullptr);

// Opens an existing regular file for reading. FIFOs, devices, sockets and directories are refused
// with a clear error instead of blocking or misbehaving; `nofollow` refuses a symlink as the final
// component.
UniqueFd open_regular_file_at(int dirfd, const std::string& name, bool nofollow);
UniqueFd open_regular_file(const std::string& path, bool nofollow);
// The same (symlinks followed), refusing what only /proc can hand out: a path that passes through
// one of its "magic links" (/proc/<pid>/fd/N, /dev/stdout, /proc/<pid>/root, ...) fails with ELOOP
// where the kernel has openat2 (5.6+; RESOLVE_NO_MAGICLINKS), and a file on procfs with EACCES.
// Such a link reopens a file another process holds, whatever the directories on its path allow.
UniqueFd open_regular_file_outside_proc(const std::string& path);

// Reads at most `max_bytes` from `fd` (the rest is left unread); `truncated` says whether more
// remained.
std::string read_fd_limited(int fd, size_t max_bytes, bool* truncated = nullptr);

void write_all(int fd, std::string_view data);

// Writes `data` to `name` inside `dirfd` atomically: a fresh temporary (O_CREAT|O_EXCL|O_NOFOLLOW)
// in the same directory, fsync, renameat over `name`, fsync of the directory. A symlink or anything
// else already at `name` is replaced, never followed. The temporary is removed on failure.
void atomic_write_at(int dirfd, const std::string& name, std::string_view data, mode_t mode = 0644);

// Splits "/a/b/c" into ("/a/b", "c"). A path without '/' has directory ".".
std::pair<std::string, std::string> split_dir_base(const std::string& path);

}  // namespace triage
