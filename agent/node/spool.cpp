#include "agent/node/spool.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <spdlog/spdlog.h>

#include "common/safe_io.h"
#include "common/text.h"

namespace triage::agent {

namespace {

constexpr size_t kMaxSpoolFile = 512u << 20;

std::vector<std::string> list_names(int dirfd) {
  std::vector<std::string> names;
  try {
    for (DirEntry& e : list_dir_at(dirfd))
      names.push_back(std::move(e.name));
  } catch (const std::system_error&) {
    // an unreadable spool directory holds nothing to replay
  }
  return names;
}

// "00000042.jsonl" -> 42; "4242.jsonl" -> 4242.
std::optional<uint64_t> numbered(const std::string& name) {
  static constexpr std::string_view kExt = ".jsonl";
  if (name.size() <= kExt.size() ||
      name.compare(name.size() - kExt.size(), kExt.size(), kExt) != 0) {
    return std::nullopt;
  }
  return parse_uint(std::string_view(name).substr(0, name.size() - kExt.size()));
}

std::string segment_name(uint64_t n) {
  std::string s = std::to_string(n);
  if (s.size() < 8) s.insert(0, 8 - s.size(), '0');
  return s + ".jsonl";
}

std::string job_name(uint64_t job_id) {
  return std::to_string(job_id) + ".jsonl";
}

UniqueFd ensure_dir_at(int parent, const std::string& name) {
  if (::mkdirat(parent, name.c_str(), 0700) != 0 && errno != EEXIST) {
    throw_errno("create spool directory " + name, errno);
  }
  return open_dir_at(parent, name, true);
}

// Reads a spool file, cutting a torn tail off so that the next append starts on a fresh line.
JsonLines read_and_repair(int dirfd, const std::string& name) {
  const int fd = ::openat(dirfd, name.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) spdlog::warn("spool: cannot open {}: {}", name, std::strerror(errno));
    return {};
  }
  UniqueFd f(fd);
  JsonLines lines = read_json_lines(fd);
  if (lines.torn) {
    spdlog::warn("spool: {} ends in an incomplete line (interrupted write); cutting it off", name);
    if (::ftruncate(fd, static_cast<off_t>(lines.good_size)) != 0 || ::fsync(fd) != 0) {
      spdlog::error("spool: cannot repair {}: {}", name, std::strerror(errno));
    }
  }
  return lines;
}

}  // namespace

JsonLines read_json_lines(int fd) {
  JsonLines out;
  std::string data;
  try {
    data = read_fd_limited(fd, kMaxSpoolFile);
  } catch (const std::exception& e) {
    spdlog::error("spool: {}", e.what());
    return out;
  }
  size_t start = 0;
  while (start < data.size()) {
    const size_t nl = data.find('\n', start);
    if (nl == std::string::npos) {
      out.torn = true;
      break;
    }
    const std::string_view line(data.data() + start, nl - start);
    if (!trim(line).empty()) {
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object()) {
        ++out.bad_lines;
      } else {
        out.records.push_back(std::move(j));
      }
    }
    start = nl + 1;
    out.good_size = start;
  }
  return out;
}

Spool::Spool(Options options) : options_(std::move(options)) {}

void Spool::fail(const std::string& what, int err) {
  ++write_failures_;
  last_error_ = what + ": " + std::strerror(err);
  spdlog::error("spool: {} (failure #{}; the data is kept in memory and retried)", last_error_,
                write_failures_);
}

SpoolReplay Spool::open() {
  std::error_code ec;
  std::filesystem::create_directories(options_.dir, ec);
  if (ec) throw std::system_error(ec, "create spool " + options_.dir);
  root_ = open_dir(options_.dir, true);
  if (::fchmod(root_.get(), 0700) != 0) throw_errno("chmod spool " + options_.dir, errno);
  events_dir_ = ensure_dir_at(root_.get(), "events");
  jobs_dir_ = ensure_dir_at(root_.get(), "jobs");

  SpoolReplay replay;
  uint64_t last_segment = 0;
  for (const std::string& name : list_names(events_dir_.get())) {
    if (name[0] == '.') {
      (void)::unlinkat(events_dir_.get(), name.c_str(), 0);  // a compaction that did not finish
      continue;
    }
    const auto n = numbered(name);
    if (!n) continue;
    last_segment = std::max(last_segment, *n);
    JsonLines lines = read_and_repair(events_dir_.get(), name);
    replay.torn_lines += lines.torn ? 1 : 0;
    replay.bad_lines += lines.bad_lines;
    for (const nlohmann::json& rec : lines.records) {
      const auto r = rec.find("r");
      if (r == rec.end() || !r->is_string()) {
        ++replay.bad_lines;
        continue;
      }
      try {
        if (*r == "ev" && rec.contains("e")) {
          replay.events.push_back(kernel_event_from_json(rec.at("e"), name));
        } else if (*r == "pos" && rec.contains("p") && rec.at("p").is_string()) {
          replay.kernel_position = rec.at("p").get<std::string>();
        } else {
          ++replay.bad_lines;
        }
      } catch (const std::exception& e) {
        spdlog::warn("spool: {}: skipping a record: {}", name, log_text(e.what()));
        ++replay.bad_lines;
      }
    }
  }
  if (!open_segment(std::max<uint64_t>(last_segment, 1))) {
    throw std::system_error(EIO, std::generic_category(), "open events segment: " + last_error_);
  }

  return replay;
}

bool Spool::open_segment(uint64_t number) {
  const std::string name = segment_name(number);
  const int fd = ::openat(events_dir_.get(), name.c_str(),
                          O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    fail("open " + name, errno);
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    fail("stat " + name, errno);
    ::close(fd);
    return false;
  }
  if (st.st_size == 0) (void)::fsync(events_dir_.get());
  segment_.reset(fd);
  segment_number_ = number;
  segment_size_ = st.st_size;
  return true;
}

bool Spool::append_line_block(int dirfd, const std::string& name, UniqueFd* keep_open,
                              const std::string& block) {
  UniqueFd local;
  int fd = keep_open != nullptr ? keep_open->get() : -1;
  bool created = false;
  if (fd < 0) {
    fd =
        ::openat(dirfd, name.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
      fail("open " + name, errno);
      return false;
    }
    local.reset(fd);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    fail("stat " + name, errno);
    return false;
  }
  created = st.st_size == 0;
  // Roll back to the last complete line so the file never holds half a record.
  const auto roll_back = [&] {
    if (::ftruncate(fd, st.st_size) != 0) {
      spdlog::error("spool: cannot roll back {}: {}", name, std::strerror(errno));
    }
  };
  try {
    write_all(fd, block);
  } catch (const std::system_error& e) {
    const int err = e.code().value();
    roll_back();
    fail("write " + name, err);
    return false;
  }
  if (::fdatasync(fd) != 0) {
    const int err = errno;
    roll_back();
    fail("fsync " + name, err);
    return false;
  }
  if (created && ::fsync(dirfd) != 0) {
    fail("fsync directory of " + name, errno);
    return false;
  }
  if (keep_open != nullptr) segment_size_ = st.st_size + static_cast<int64_t>(block.size());
  return true;
}

namespace {

// Event records and the source position they bring the spool to, as JSON lines: the same shape
// for an append and for a compacted segment, so replay reads both alike.
std::string event_records(const std::vector<KernelEvent>& events, const std::string& position) {
  std::string block;
  auto add = [&block](const nlohmann::json& j) {
    block += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    block += '\n';
  };
  for (const KernelEvent& e : events)
    add({{"r", "ev"}, {"e", e}});
  if (!position.empty()) add({{"r", "pos"}, {"p", position}});
  return block;
}

}  // namespace

bool Spool::append_events(const std::vector<KernelEvent>& events, const std::string& position) {
  if (events.empty() && position.empty()) return true;
  if (segment_size_ >= options_.segment_bytes || !segment_) {
    if (!open_segment(segment_number_ + (segment_ ? 1 : 0))) return false;
  }
  const std::string block = event_records(events, position);
  return append_line_block(events_dir_.get(), segment_name(segment_number_), &segment_, block);
}

bool Spool::append_job(uint64_t job_id, const nlohmann::json& record) {
  std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  line += '\n';
  return append_line_block(jobs_dir_.get(), job_name(job_id), nullptr, line);
}

bool Spool::compact_events(const std::vector<KernelEvent>& live, const std::string& position) {
  const uint64_t next = segment_number_ + 1;
  const std::string block = event_records(live, position);
  try {
    atomic_write_at(events_dir_.get(), segment_name(next), block, 0600);
  } catch (const std::system_error& e) {
    fail("compact events into " + segment_name(next), e.code().value());
    return false;
  }
  const uint64_t old = segment_number_;
  if (!open_segment(next)) return false;
  for (const std::string& name : list_names(events_dir_.get())) {
    const auto n = numbered(name);
    if (n && *n <= old) (void)::unlinkat(events_dir_.get(), name.c_str(), 0);
  }
  (void)::fsync(events_dir_.get());
  return true;
}

size_t Spool::expire_event_segments(int64_t cutoff_usec) {
  size_t removed = 0;
  for (const std::string& name : list_names(events_dir_.get())) {
    const auto n = numbered(name);
    if (!n || *n == segment_number_) continue;
    struct stat st {};
    if (::fstatat(events_dir_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    const int64_t mtime =
        static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000 + st.st_mtim.tv_nsec / 1000;
    if (mtime < cutoff_usec && ::unlinkat(events_dir_.get(), name.c_str(), 0) == 0) ++removed;
  }
  return removed;
}

bool Spool::remove_job(uint64_t job_id) {
  if (::unlinkat(jobs_dir_.get(), job_name(job_id).c_str(), 0) != 0 && errno != ENOENT)
    return false;
  return true;
}

std::vector<Spool::JobFile> Spool::list_jobs() const {
  std::vector<JobFile> out;
  for (const std::string& name : list_names(jobs_dir_.get())) {
    const auto id = numbered(name);
    if (!id) continue;
    struct stat st {};
    if (::fstatat(jobs_dir_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode)) {
      continue;
    }
    out.push_back({*id,
                   static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000 + st.st_mtim.tv_nsec / 1000,
                   st.st_size});
  }
  std::sort(out.begin(), out.end(), [](const JobFile& a, const JobFile& b) {
    return a.mtime_usec != b.mtime_usec ? a.mtime_usec > b.mtime_usec : a.job_id > b.job_id;
  });
  return out;
}

std::vector<nlohmann::json> Spool::read_job(uint64_t job_id, size_t* torn, size_t* bad) {
  JsonLines lines = read_and_repair(jobs_dir_.get(), job_name(job_id));
  if (torn != nullptr) *torn += lines.torn ? 1 : 0;
  if (bad != nullptr) *bad += lines.bad_lines;
  return std::move(lines.records);
}

SpoolUsage Spool::usage() const {
  SpoolUsage u;
  auto add = [](int dirfd, int64_t& bytes, size_t& files) {
    for (const std::string& name : list_names(dirfd)) {
      struct stat st {};
      if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      bytes += st.st_size;
      ++files;
    }
  };
  add(events_dir_.get(), u.event_bytes, u.event_segments);
  add(jobs_dir_.get(), u.job_bytes, u.job_files);
  return u;
}

}  // namespace triage::agent
