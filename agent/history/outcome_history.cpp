#include "agent/history/outcome_history.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <spdlog/spdlog.h>

#include "common/text.h"
#include "common/time_util.h"

namespace triage::agent {

namespace {

constexpr const char* kFile = "outcomes.jsonl";
constexpr const char* kHeaderTag = "outcome-history";
constexpr size_t kSetAsideNamesKept = 8;
// Far beyond HistoryMaxJobs' largest window; a bigger file is read up to here and set aside.
constexpr size_t kMaxFile = 512u << 20;

std::string dump_line(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string header_line() {
  return dump_line({{"r", kHeaderTag}, {"v", kOutcomeRecordVersion}});
}

// Why a file's first line does not introduce records this agent reads ("" when it does).
std::string header_problem(const nlohmann::json& first) {
  const auto r = first.find("r");
  if (r == first.end() || *r != kHeaderTag) return "no outcome-history header";
  const auto v = first.find("v");
  if (v == first.end() || !v->is_number_integer()) return "a header without a version";
  if (v->get<int64_t>() != kOutcomeRecordVersion) {
    return "version " + std::to_string(v->get<int64_t>()) + " (this agent reads " +
           std::to_string(kOutcomeRecordVersion) + ")";
  }
  return "";
}

bool earlier(const OutcomeRecord& a, const OutcomeRecord& b) {
  return a.end_time != b.end_time ? a.end_time < b.end_time : a.job_id < b.job_id;
}

size_t heap_bytes(const std::string& s) {
  // libstdc++ keeps up to 15 characters inside the string itself.
  return s.capacity() > 15 ? s.capacity() + 1 : 0;
}

size_t heap_bytes(const std::optional<std::string>& s) {
  return s ? heap_bytes(*s) : 0;
}

}  // namespace

bool history_drops_oldest(int64_t oldest_end, size_t count, int64_t now, HistoryWindow window) {
  if (count == 0) return false;
  if (count > window.max_jobs) return true;
  return oldest_end < now - window.days * 86400;
}

bool history_needs_rewrite(size_t lines, size_t kept) {
  return lines > kept + std::max<size_t>(kept / 4, 64);
}

OutcomeHistory::OutcomeHistory(Options options) : options_(std::move(options)) {}

void OutcomeHistory::open(int64_t now) {
  std::error_code ec;
  std::filesystem::create_directories(options_.dir, ec);
  if (ec) throw std::system_error(ec, "create history directory " + options_.dir);
  dir_ = open_dir(options_.dir, true);
  if (::fchmod(dir_.get(), 0700) != 0) throw_errno("chmod " + options_.dir, errno);
  load(now);
}

void OutcomeHistory::load(int64_t now) {
  const int fd = ::openat(dir_.get(), kFile, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) {
      spdlog::error("history: cannot open {}/{}: {}", options_.dir, kFile, std::strerror(errno));
      set_aside(std::string("unopenable: ") + std::strerror(errno));
    }
    (void)rewrite();
    return;
  }
  std::string data;
  try {
    UniqueFd file(fd);
    data = read_fd_limited(fd, kMaxFile);
  } catch (const std::exception& e) {
    spdlog::error("history: cannot read {}: {}", kFile, e.what());
  }
  const FileScan scan = read_records(data);
  data = std::string();
  file_lines_ = scan.records;
  if (scan.torn) {
    ++counts_.torn;
    spdlog::warn("history: {} ends in an incomplete line (interrupted write); cutting it off",
                 kFile);
  }
  if (!scan.problem.empty()) {
    counts_.unreadable += scan.unreadable;
    set_aside(scan.problem + "; " + std::to_string(scan.unreadable) + " unreadable line(s)");
  }
  trim(now);
  if (!scan.problem.empty() || scan.torn || !scan.header ||
      history_needs_rewrite(file_lines_, records_.size())) {
    (void)rewrite();
  }
  spdlog::info("history: {} job outcome(s) kept ({} days, at most {} jobs)", records_.size(),
               options_.window.days, options_.window.max_jobs);
}

// Line by line, so that loading a full history never holds more than the file's text and one
// parsed line besides the records.
OutcomeHistory::FileScan OutcomeHistory::read_records(std::string_view data) {
  FileScan scan;
  uint64_t not_json = 0;
  size_t start = 0;
  while (start < data.size()) {
    const size_t nl = data.find('\n', start);
    if (nl == std::string_view::npos) {
      scan.torn = true;
      break;
    }
    const std::string_view line = data.substr(start, nl - start);
    start = nl + 1;
    if (triage::trim(line).empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      ++not_json;
      continue;
    }
    if (!scan.header) {
      scan.header = true;
      scan.problem = header_problem(j);
      scan.wrong_header = !scan.problem.empty();
      scan.unreadable += scan.wrong_header ? 1 : 0;
      continue;
    }
    ++scan.records;
    if (scan.wrong_header) {
      ++scan.unreadable;
      continue;
    }
    try {
      keep(outcome_from_json(j));
    } catch (const std::exception& e) {
      if (scan.problem.empty())
        scan.problem = std::string("a record that does not read: ") + e.what();
      ++scan.unreadable;
    }
  }
  scan.unreadable += not_json;
  if (not_json > 0 && !scan.wrong_header) {
    scan.problem += (scan.problem.empty() ? "" : "; ") + std::to_string(not_json) +
                    " line(s) that are not JSON";
  }
  return scan;
}

void OutcomeHistory::set_aside(const std::string& why) {
  std::string name = std::string(kFile) + ".set-aside-" + std::to_string(now_usec() / 1000000);
  for (int n = 1; ::faccessat(dir_.get(), name.c_str(), F_OK, AT_SYMLINK_NOFOLLOW) == 0; ++n)
    name.append(".").append(std::to_string(n));  // not "." + string: GCC bug 105651 at -O3
  if (::renameat(dir_.get(), kFile, dir_.get(), name.c_str()) != 0) {
    spdlog::error("history: cannot set {} aside ({}): {}", kFile, why, std::strerror(errno));
    return;
  }
  (void)::fsync(dir_.get());
  ++counts_.set_aside;
  counts_.set_aside_files.push_back(name + ": " + why);
  if (counts_.set_aside_files.size() > kSetAsideNamesKept)
    counts_.set_aside_files.erase(counts_.set_aside_files.begin());
  spdlog::error(
      "history: {}/{} set aside as {}: {}; the records it held that this agent reads "
      "are kept",
      options_.dir, kFile, name, why);
}

void OutcomeHistory::keep(const OutcomeRecord& record) {
  const auto at = std::lower_bound(records_.begin(), records_.end(), record, earlier);
  if (at != records_.end() && !earlier(record, *at)) {
    *at = record;  // the same job's same end: a later copy supersedes
  } else {
    records_.insert(at, record);
  }
}

bool OutcomeHistory::add(const OutcomeRecord& record, int64_t now) {
  keep(record);
  trim(now);
  bool durable = append_line(dump_line(outcome_to_compact_json(record)));
  if (dirty_ || history_needs_rewrite(file_lines_, records_.size())) durable = rewrite();
  return durable;
}

void OutcomeHistory::maintain(int64_t now) {
  trim(now);
  if (dirty_ || history_needs_rewrite(file_lines_, records_.size())) (void)rewrite();
}

void OutcomeHistory::trim(int64_t now) {
  while (!records_.empty() &&
         history_drops_oldest(records_.front().end_time, records_.size(), now, options_.window)) {
    records_.pop_front();
    ++counts_.dropped;
  }
  counts_.kept = records_.size();
}

bool OutcomeHistory::rewrite() {
  std::string data = header_line();
  for (const OutcomeRecord& r : records_)
    data += dump_line(outcome_to_compact_json(r));
  try {
    atomic_write_at(dir_.get(), kFile, data, 0600);
  } catch (const std::system_error& e) {
    ++counts_.write_failures;
    dirty_ = true;
    spdlog::error("history: cannot rewrite {}: {} (kept in memory, retried)", kFile, e.what());
    return false;
  }
  file_lines_ = records_.size();
  dirty_ = false;
  return true;
}

bool OutcomeHistory::append_line(const std::string& line) {
  const int fd = ::openat(dir_.get(), kFile, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    spdlog::error("history: cannot open {}: {}", kFile, std::strerror(errno));
    ++counts_.write_failures;
    dirty_ = true;
    return false;
  }
  UniqueFd file(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ++counts_.write_failures;
    dirty_ = true;
    return false;
  }
  try {
    write_all(fd, line);
    if (::fdatasync(fd) != 0) throw std::system_error(errno, std::generic_category(), "fsync");
  } catch (const std::system_error& e) {
    // Never leave half a record: back to the last complete line.
    if (::ftruncate(fd, st.st_size) != 0)
      spdlog::error("history: cannot roll back {}: {}", kFile, std::strerror(errno));
    spdlog::error("history: cannot append to {}: {} (kept in memory, retried)", kFile, e.what());
    ++counts_.write_failures;
    dirty_ = true;
    return false;
  }
  ++file_lines_;
  return true;
}

std::string OutcomeHistory::answer(const std::string& host, int64_t since) const {
  std::string out = "{\"host\":" + nlohmann::json(host).dump() + ",\"records\":[";
  bool first = true;
  for (const OutcomeRecord& r : records_) {
    if (r.end_time < since) continue;
    if (!first) out += ',';
    first = false;
    out += outcome_to_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  const nlohmann::json tail = {
      {"kept", records_.size()},
      {"dropped", counts_.dropped},
      {"window", {{"days", options_.window.days}, {"max_jobs", options_.window.max_jobs}}},
      {"unreadable", counts_.unreadable},
      {"torn", counts_.torn},
      {"set_aside", counts_.set_aside},
      {"set_aside_files", counts_.set_aside_files},
      {"write_failures", counts_.write_failures}};
  const std::string rest = tail.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  out += "],";
  out.append(rest, 1, std::string::npos);  // the tail's members after its opening brace
  return out;
}

size_t OutcomeHistory::memory_bytes() const {
  // A deque stores its elements in blocks of 512 bytes (at least one element each) plus a map of
  // block pointers; counting the elements' own size is close enough.
  size_t bytes = sizeof(*this) + records_.size() * sizeof(OutcomeRecord);
  for (const OutcomeRecord& r : records_) {
    bytes += heap_bytes(r.user) + heap_bytes(r.status) + heap_bytes(r.cls) + heap_bytes(r.blame) +
             heap_bytes(r.nodelist);
    bytes += r.implicated.capacity() * sizeof(ImplicatedNode);
    for (const ImplicatedNode& n : r.implicated)
      bytes += heap_bytes(n.node) + heap_bytes(n.why);
  }
  return bytes;
}

}  // namespace triage::agent
