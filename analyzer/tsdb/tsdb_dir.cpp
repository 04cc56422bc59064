#include "analyzer/tsdb/tsdb_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include <nlohmann/json.hpp>

#include "common/safe_io.h"
#include "common/text.h"

namespace triage::tsdb {

namespace {

constexpr int kMaxDepth = 8;  // a TSDB is at most three levels deep (wal/checkpoint.N/segment)

struct Entry {
  std::string name;
  struct stat st {};
};

// Entries of a directory, lstat'ed (symlinks are reported as symlinks, never followed).
std::vector<Entry> list_dir(int dirfd) {
  std::vector<Entry> out;
  for (DirEntry& e : list_dir_at(dirfd)) {
    Entry en;
    en.name = std::move(e.name);
    if (::fstatat(dirfd, en.name.c_str(), &en.st, AT_SYMLINK_NOFOLLOW) != 0)
      continue;  // raced away
    out.push_back(std::move(en));
  }
  return out;
}

uint64_t tree_bytes(int dirfd, int depth) {
  if (depth > kMaxDepth) return 0;
  uint64_t total = 0;
  for (const auto& e : list_dir(dirfd)) {
    if (S_ISREG(e.st.st_mode)) {
      total += static_cast<uint64_t>(e.st.st_size);
    } else if (S_ISDIR(e.st.st_mode)) {
      try {
        UniqueFd sub = open_dir_at(dirfd, e.name, true);
        total += tree_bytes(sub.get(), depth + 1);
      } catch (const std::system_error&) {
        // Counted as zero; the copy reports the unreadable entry properly.
      }
    }
  }
  return total;
}

bool looks_like_ulid(const std::string& s) {
  if (s.size() != 26) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z'); });
}

std::optional<BlockInfo> read_block(int dirfd, const std::string& name, std::string* problem) {
  try {
    UniqueFd bd = open_dir_at(dirfd, name, true);
    UniqueFd meta = open_regular_file_at(bd.get(), "meta.json", true);
    bool truncated = false;
    const std::string text = read_fd_limited(meta.get(), 1 << 20, &truncated);
    if (truncated) {
      *problem = name + "/meta.json: larger than 1 MiB";
      return std::nullopt;
    }
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("minTime") || !j.contains("maxTime") ||
        !j["minTime"].is_number_integer() || !j["maxTime"].is_number_integer()) {
      *problem = name + "/meta.json: not a block's meta.json (no integer minTime/maxTime)";
      return std::nullopt;
    }
    BlockInfo b;
    b.ulid = name;
    b.min_ms = j["minTime"].get<int64_t>();
    b.max_ms = j["maxTime"].get<int64_t>();
    if (auto s = j.find("stats"); s != j.end() && s->is_object()) {
      if (auto n = s->find("numSamples"); n != s->end() && n->is_number_integer())
        b.num_samples = n->get<int64_t>();
    }
    b.bytes = tree_bytes(bd.get(), 1);
    return b;
  } catch (const std::system_error& e) {
    *problem = name + ": " + e.what();
    return std::nullopt;
  }
}

uint64_t free_bytes(const std::string& dir) {
  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) != 0) return UINT64_MAX;
  return static_cast<uint64_t>(vfs.f_bavail) * static_cast<uint64_t>(vfs.f_frsize);
}

void copy_file(int src_dirfd, const std::string& name, int dst_dirfd, const std::string& shown,
               CopyReport& report) {
  UniqueFd in = open_regular_file_at(src_dirfd, name, true);
  const int out_fd =
      ::openat(dst_dirfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out_fd < 0) throw_errno("create " + shown + " in the copy", errno);
  UniqueFd out(out_fd);
  // copy_file_range lets the kernel clone or copy without a trip through user space; it is not
  // available across every pair of filesystems, so fall back to read/write.
  bool use_cfr = true;
  std::vector<char> buf;
  for (;;) {
    ssize_t n = 0;
    if (use_cfr) {
      n = ::copy_file_range(in.get(), nullptr, out.get(), nullptr, size_t{1} << 30, 0);
      if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP ||
                    errno == EPERM)) {
        use_cfr = false;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw_errno("copy " + shown, errno);
    } else {
      if (buf.empty()) buf.resize(size_t{1} << 20);
      n = ::read(in.get(), buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw_errno("read " + shown, errno);
      if (n > 0) write_all(out.get(), std::string_view(buf.data(), static_cast<size_t>(n)));
    }
    if (n == 0) break;
    report.bytes += static_cast<uint64_t>(n);
  }
  ++report.files;
}

void copy_tree(int src_dirfd, int dst_dirfd, const std::string& shown, int depth,
               CopyReport& report) {
  if (depth > kMaxDepth) {
    report.skipped.push_back(shown + " (nested too deep)");
    return;
  }
  for (const auto& e : list_dir(src_dirfd)) {
    const std::string child = shown + "/" + e.name;
    if (S_ISREG(e.st.st_mode)) {
      copy_file(src_dirfd, e.name, dst_dirfd, child, report);
    } else if (S_ISDIR(e.st.st_mode)) {
      if (::mkdirat(dst_dirfd, e.name.c_str(), 0700) != 0)
        throw_errno("mkdir " + child + " in the copy", errno);
      UniqueFd s = open_dir_at(src_dirfd, e.name, true);
      UniqueFd d = open_dir_at(dst_dirfd, e.name, true);
      copy_tree(s.get(), d.get(), child, depth + 1, report);
    } else {
      report.skipped.push_back(
          child + (S_ISLNK(e.st.st_mode) ? " (symlink, not followed)" : " (not a regular file)"));
    }
  }
}

}  // namespace

std::optional<int64_t> TsdbDirScan::blocks_min_ms() const {
  if (blocks.empty()) return std::nullopt;
  int64_t m = blocks.front().min_ms;
  for (const auto& b : blocks)
    m = std::min(m, b.min_ms);
  return m;
}

std::optional<int64_t> TsdbDirScan::blocks_max_ms() const {
  if (blocks.empty()) return std::nullopt;
  int64_t m = blocks.front().max_ms;
  for (const auto& b : blocks)
    m = std::max(m, b.max_ms);
  return m;
}

std::optional<pid_t> lock_holder_from_proc_locks(const std::string& text, dev_t dev, ino_t ino) {
  // "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234567 0 EOF" (major and minor in hex, inode decimal);
  // blocked waiters are listed as "1: -> FLOCK ..." and do not hold the lock.
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<std::string> f;
    std::string w;
    while (ls >> w)
      f.push_back(w);
    if (f.size() < 6 || f[1] == "->") continue;
    const auto pid = parse_int(f[4]);
    const auto parts = split(f[5], ':');
    if (!pid || parts.size() != 3) continue;
    unsigned long maj = 0, min = 0;
    try {
      maj = std::stoul(std::string(parts[0]), nullptr, 16);
      min = std::stoul(std::string(parts[1]), nullptr, 16);
    } catch (const std::exception&) {
      continue;
    }
    const auto inode = parse_uint(parts[2]);
    if (!inode) continue;
    if (maj == major(dev) && min == minor(dev) && *inode == static_cast<uint64_t>(ino)) {
      return static_cast<pid_t>(*pid);
    }
  }
  return std::nullopt;
}

TsdbDirScan scan_tsdb_dir(const std::string& job_dir) {
  TsdbDirScan scan;
  scan.path = job_dir + "/prometheus";
  UniqueFd dir;
  try {
    UniqueFd job = open_dir(job_dir, false);
    // The job's owner may have made prometheus/ a symlink to scratch storage; we run as that
    // owner, so following this one link is theirs to decide. Nothing inside it is followed.
    dir = open_dir_at(job.get(), "prometheus", false);
  } catch (const std::system_error& e) {
    if (e.code().value() != ENOENT) {
      scan.exists = e.code().value() != ENOTDIR;
      scan.error = e.what();
    }
    return scan;
  }
  scan.exists = true;
  std::vector<Entry> entries;
  try {
    entries = list_dir(dir.get());
  } catch (const std::system_error& e) {
    scan.error = e.what();
    return scan;
  }
  for (const auto& e : entries) {
    if (S_ISLNK(e.st.st_mode)) {
      scan.problems.push_back(e.name + ": a symlink inside the TSDB, not followed");
      continue;
    }
    if (e.name == "lock") {
      scan.has_lock = true;
      std::string locks;
      try {
        UniqueFd pl = open_regular_file("/proc/locks", true);
        locks = read_fd_limited(pl.get(), 16 << 20);
      } catch (const std::system_error&) {
      }
      scan.lock_holder = lock_holder_from_proc_locks(locks, e.st.st_dev, e.st.st_ino);
      continue;
    }
    if (!S_ISDIR(e.st.st_mode)) {
      if (S_ISREG(e.st.st_mode)) scan.total_bytes += static_cast<uint64_t>(e.st.st_size);
      continue;
    }
    try {
      if (e.name == "wal" || e.name == "chunks_head") {
        UniqueFd sub = open_dir_at(dir.get(), e.name, true);
        const uint64_t bytes = tree_bytes(sub.get(), 1);
        if (e.name == "wal") {
          scan.has_wal = true;
          scan.wal_bytes = bytes;
        } else {
          scan.has_chunks_head = true;
          scan.chunks_head_bytes = bytes;
        }
        scan.total_bytes += bytes;
      } else if (looks_like_ulid(e.name)) {
        std::string problem;
        if (auto b = read_block(dir.get(), e.name, &problem)) {
          scan.total_bytes += b->bytes;
          scan.blocks.push_back(std::move(*b));
        } else {
          scan.problems.push_back(problem);
        }
      }
    } catch (const std::system_error& ex) {
      scan.problems.push_back(e.name + ": " + ex.what());
    }
  }
  std::sort(scan.blocks.begin(), scan.blocks.end(),
            [](const BlockInfo& a, const BlockInfo& b) { return a.min_ms < b.min_ms; });
  return scan;
}

CopyReport copy_tsdb(const TsdbDirScan& scan, const std::string& dest, const CopyOptions& options) {
  CopyReport report;
  UniqueFd src = open_dir(scan.path, false);
  UniqueFd dst = open_dir(dest, true);

  std::vector<const BlockInfo*> blocks;
  uint64_t need = 0;
  for (const auto& b : scan.blocks) {
    if (options.min_ms && b.max_ms <= *options.min_ms) {
      report.skipped.push_back(b.ulid + " (ends before the window)");
      continue;
    }
    if (options.max_ms && b.min_ms >= *options.max_ms) {
      report.skipped.push_back(b.ulid + " (starts after the window)");
      continue;
    }
    blocks.push_back(&b);
    need += b.bytes;
  }
  if (options.include_wal) need += scan.wal_bytes + scan.chunks_head_bytes;
  if (need > options.max_bytes) {
    throw std::runtime_error("the TSDB copy would need " + std::to_string(need >> 20) +
                             " MiB, over the " + std::to_string(options.max_bytes >> 20) +
                             " MiB limit");
  }
  const uint64_t avail = free_bytes(dest);
  if (avail != UINT64_MAX && need + (uint64_t{64} << 20) > avail) {
    throw std::runtime_error("not enough scratch space for the TSDB copy in " + dest + ": need " +
                             std::to_string(need >> 20) + " MiB, " + std::to_string(avail >> 20) +
                             " MiB free");
  }

  for (const BlockInfo* b : blocks) {
    if (::mkdirat(dst.get(), b->ulid.c_str(), 0700) != 0)
      throw_errno("mkdir " + b->ulid + " in the copy", errno);
    UniqueFd s = open_dir_at(src.get(), b->ulid, true);
    UniqueFd d = open_dir_at(dst.get(), b->ulid, true);
    copy_tree(s.get(), d.get(), b->ulid, 1, report);
    report.blocks.push_back(b->ulid);
  }
  if (options.include_wal) {
    for (const char* name : {"wal", "chunks_head"}) {
      const bool present = std::string(name) == "wal" ? scan.has_wal : scan.has_chunks_head;
      if (!present) continue;
      if (::mkdirat(dst.get(), name, 0700) != 0)
        throw_errno(std::string("mkdir ") + name + " in the copy", errno);
      UniqueFd s = open_dir_at(src.get(), name, true);
      UniqueFd d = open_dir_at(dst.get(), name, true);
      copy_tree(s.get(), d.get(), name, 1, report);
    }
    report.wal_copied = scan.has_wal;
  } else {
    if (scan.has_wal)
      report.skipped.emplace_back("wal (live job: the write-ahead log is being written)");
    if (scan.has_chunks_head) report.skipped.emplace_back("chunks_head (live job)");
  }
  if (scan.has_lock) report.skipped.emplace_back("lock (never copied)");
  return report;
}

}  // namespace triage::tsdb
