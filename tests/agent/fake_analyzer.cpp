// Stands in for `slurm-triage analyze` in the agent's tests. It records how it was started (argv,
// uid, gid, groups, the evidence on stdin) into <work_dir>/analyzer-<jobid>-<pid>.json, writes a
// report file beside it as whoever it runs as, and answers on stdout like the analyzer would.
// The job's name steers it: "hang" never ends, "crash" fails, "selfkill" dies of SIGKILL,
// "chatty" prints far too much.
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

// The descriptors it was started with (listed before it opens anything of its own).
std::vector<int> open_fds() {
  std::vector<int> fds;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return fds;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const int fd = std::stoi(e->d_name);
    if (fd != ::dirfd(d)) fds.push_back(fd);
  }
  ::closedir(d);
  std::sort(fds.begin(), fds.end());
  return fds;
}

int main(int argc, char** argv) {
  const std::vector<int> fds = open_fds();
  std::string input;
  char buf[65536];
  for (ssize_t n; (n = ::read(0, buf, sizeof buf)) > 0;)
    input.append(buf, static_cast<size_t>(n));
  nlohmann::json evidence = nlohmann::json::parse(input, nullptr, false);
  if (!evidence.is_object()) {
    std::cerr << "fake analyzer: evidence is not JSON\n";
    return 2;
  }
  const nlohmann::json& job = evidence["job"];
  const uint64_t job_id = job.value("job_id", uint64_t{0});
  const std::string name = job.value("name", "");
  const std::string work_dir = job.value("work_dir", "/tmp");

  std::vector<gid_t> groups(static_cast<size_t>(getgroups(0, nullptr)));
  if (!groups.empty())
    groups.resize(static_cast<size_t>(getgroups(static_cast<int>(groups.size()), groups.data())));
  nlohmann::json record = {{"argv", std::vector<std::string>(argv, argv + argc)},
                           {"uid", getuid()},
                           {"euid", geteuid()},
                           {"gid", getgid()},
                           {"groups", groups},
                           {"fds", fds},
                           {"evidence", evidence}};
  char cwd[4096] = {};
  if (getcwd(cwd, sizeof cwd) != nullptr) record["cwd"] = cwd;
  const std::string path =
      work_dir + "/analyzer-" + std::to_string(job_id) + "-" + std::to_string(getpid()) + ".json";
  // Written whole, then renamed, so that the test never reads half a record.
  if (FILE* f = std::fopen((path + ".tmp").c_str(), "w")) {
    const std::string text = record.dump();
    const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    const bool closed = std::fclose(f) == 0;
    if (!written || !closed || std::rename((path + ".tmp").c_str(), path.c_str()) != 0)
      std::cerr << "fake analyzer: cannot write " << path << "\n";
  } else {
    std::cerr << "fake analyzer: cannot write " << path << "\n";
    return 3;
  }

  if (name == "hang") {
    for (;;)
      std::this_thread::sleep_for(std::chrono::seconds(60));
  }
  if (name == "selfkill") {
    std::cerr << "fake analyzer: killing itself as asked\n";
    ::kill(::getpid(), SIGKILL);
  }
  if (name == "crash") {
    std::cerr << "fake analyzer: crashing as asked\n";
    return 3;
  }
  if (name == "chatty") {
    const std::string line(1024, 'x');
    for (int i = 0; i < 8192; ++i)
      std::cout << line << '\n';
    return 0;
  }
  const std::string report = evidence.value("report_path", "").empty()
                                 ? work_dir + "/triage-" + std::to_string(job_id) + ".md"
                                 : evidence.value("report_path", "");
  const int fd =
      ::open(report.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd >= 0) {
    const std::string body = "# triage of job " + std::to_string(job_id) + "\n";
    (void)!::write(fd, body.data(), body.size());
    ::close(fd);
  }
  std::cout << nlohmann::json({{"status", "failed"},
                               {"primary_failure", {{"class", "oom-host"}, {"stage", "Training"}}},
                               {"report_path", report}})
                   .dump()
            << "\n";
  return 0;
}
