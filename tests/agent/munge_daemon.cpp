#include "tests/agent/munge_daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>
#include <vector>

#include "agent/net/munge_auth.h"

namespace triage::agent::testing {

MungeDaemon::MungeDaemon(const std::string& dir) : socket_(dir + "/munge.sock") {
  const std::string key = dir + "/munge.key";
  {
    std::ifstream rnd("/dev/urandom", std::ios::binary);
    std::string bytes(1024, '\0');
    rnd.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    std::ofstream out(key, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  ::chmod(key.c_str(), 0600);
  const std::string args[] = {"munged",
                              "--socket=" + socket_,
                              "--key-file=" + key,
                              "--pid-file=" + dir + "/munged.pid",
                              "--log-file=" + dir + "/munged.log",
                              "--seed-file=" + dir + "/munged.seed",
                              "--foreground"};
  pid_ = ::fork();
  if (pid_ == 0) {
    const int err = ::open((dir + "/munged.stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (err >= 0) {
      ::dup2(err, 1);
      ::dup2(err, 2);
    }
    std::vector<char*> argv;
    for (const auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp("munged", argv.data());
    ::_exit(127);
  }
  for (int i = 0; i < 500; ++i) {
    std::string error;
    if (::access(socket_.c_str(), F_OK) == 0 &&
        munge_credential(socket_, "probe", error).has_value()) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

MungeDaemon::~MungeDaemon() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

}  // namespace triage::agent::testing
