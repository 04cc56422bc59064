#include "analyzer/extra_logs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/safe_io.h"
#include "common/text.h"

namespace triage {

namespace {

bool matches(const std::string& name, std::string_view prefix,
             std::initializer_list<std::string_view> suffixes) {
  if (name.rfind(prefix, 0) != 0) return false;
  for (const auto s : suffixes) {
    if (name.size() >= prefix.size() + s.size() &&
        name.compare(name.size() - s.size(), s.size(), s) == 0)
      return true;
  }
  return false;
}

// Names in a directory that satisfy `keep`, sorted, looking at no more than `max_entries` entries.
template <typename Keep>
std::vector<std::string> list_names(int dirfd, const std::string& sub, size_t max_entries,
                                    Keep keep, bool& capped) {
  std::vector<std::string> out;
  try {
    for (DirEntry& e : list_dir_at(open_dir_at(dirfd, sub, false).get(), max_entries, &capped)) {
      if (keep(e.name, e.type)) out.push_back(std::move(e.name));
    }
  } catch (const std::system_error&) {
    // an unreadable directory contributes no logs
  }
  return out;
}

// Ranks x groups kept from the per-rank logs, as for the job's own log (log_facts.cpp).
constexpr size_t kMaxExtraCollectives = 16384;

// rank-3.log -> 3; -1 for any other name (rank-3-retry.log, worker logs).
int64_t rank_of_file(const std::string& rel) {
  if (!matches(rel, "rank-", {".log"})) return -1;
  const auto n = parse_int(std::string_view(rel).substr(5, rel.size() - 9));
  return n && *n >= 0 ? *n : -1;
}

void merge_into(ScanResult& dst, ScanResult&& src) {
  if (dst.classes.empty()) dst.classes.resize(src.classes.size());
  for (size_t i = 0; i < src.classes.size(); ++i) {
    auto& from = src.classes[i];
    auto& to = dst.classes[i];
    const uint64_t uncounted = from.count - from.first.size() - from.last.size();
    for (auto& f : from.first)
      to.add(std::move(f));
    for (auto& f : from.last)
      to.add(std::move(f));
    to.count += uncounted;
    to.settle();
  }
  dst.bytes_scanned += src.bytes_scanned;
  dst.lines += src.lines;
}

}  // namespace

ExtraLogs scan_extra_logs(int job_dir_fd, const ScanPlan& plan, bool full,
                          const ExtraLogLimits& limits) {
  ExtraLogs out;
  bool capped = false;
  std::vector<std::string> files;  // relative to the job dir
  std::vector<bool> is_worker_out;
  if (full) {
    for (const auto& n : list_names(
             job_dir_fd, ".", limits.max_dir_entries,
             [](const std::string&name, unsigned char) { return matches(name, "rank-", {".log"}); },
             capped)) {
      files.push_back(n);
      is_worker_out.push_back(false);
    }
  }
  const auto sessions = list_names(
      job_dir_fd, "ray_logs", limits.max_dir_entries,
      [](const std::string&, unsigned char type) { return type == DT_DIR || type == DT_UNKNOWN; },
      capped);
  size_t probes = 0;
  for (size_t s = 0; s < sessions.size() && s < limits.max_ray_sessions; ++s) {
    const std::string dir = "ray_logs/" + sessions[s];
    for (const auto& n : list_names(
             job_dir_fd, dir, limits.max_dir_entries,
             [full](const std::string&name, unsigned char) {
               return matches(name, "worker",
                              full ? std::initializer_list<std::string_view>{".out", ".err"}
                                   : std::initializer_list<std::string_view>{".out"});
             },
             capped)) {
      const bool out_file = n.size() > 4 && n.compare(n.size() - 4, 4, ".out") == 0;
      if (!full && probes >= limits.restore_probe_files) break;
      probes += out_file ? 1 : 0;
      std::string rel = dir;
      rel += '/';
      rel += n;
      files.push_back(std::move(rel));
      is_worker_out.push_back(out_file);
    }
  }
  if (capped)
    out.notes.push_back(
        "Some directories of the job had too many entries; only the first were looked at.");
  if (files.size() > limits.max_files) {
    out.notes.push_back("Only " + std::to_string(limits.max_files) + " of " +
                        std::to_string(files.size()) + " per-rank and worker logs were scanned.");
    files.resize(limits.max_files);
  }

  uint64_t budget = limits.max_total_bytes;
  for (size_t i = 0; i < files.size() && budget > 0; ++i) {
    UniqueFd fd;
    try {
      fd = open_regular_file_at(job_dir_fd, files[i], false);
    } catch (const std::system_error& e) {
      out.notes.push_back("Could not read " + files[i] + ": " + e.what());
      continue;
    }
    ScanOptions opt;
    opt.head_lines = 0;
    opt.tail_lines = 0;
    opt.source = files[i];
    opt.block_bytes = size_t{256} * 1024;
    opt.max_bytes = std::min(budget, full ? limits.max_bytes_per_file : limits.restore_probe_bytes);
    try {
      ScanResult r = scan_log(fd.get(), plan, opt);
      budget -= std::min(budget, r.bytes_scanned);
      ++out.files_scanned;
      if (is_worker_out[i] && !out.restore.restored_step &&
          (r.facts.restore.restored_step || r.facts.restore.fresh)) {
        out.restore = r.facts.restore;
        out.restore.source = files[i];
      }
      if (full) {
        if (const int64_t rank = rank_of_file(files[i]); rank >= 0) {
          for (auto& c : r.facts.collectives) {
            if (out.collectives.size() >= kMaxExtraCollectives) break;
            c.rank = rank;
            out.collectives.push_back(std::move(c));
          }
        }
        for (const auto& m : r.classes)
          out.any_findings = out.any_findings || m.count > 0;
        merge_into(out.merged, std::move(r));
      }
    } catch (const std::system_error& e) {
      out.notes.push_back("Could not read " + files[i] + ": " + e.what());
    }
  }
  if (budget == 0)
    out.notes.push_back("The extra logs were only partly scanned (byte budget reached).");
  return out;
}

}  // namespace triage
