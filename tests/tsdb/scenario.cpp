#include "tests/tsdb/scenario.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <stdexcept>

extern char** environ;

namespace triage::tsdb::testing {

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

uint64_t hash_str(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

class Out {
 public:
  explicit Out(const std::string& path) {
    f_ = std::fopen(path.c_str(), "wb");
    if (f_ == nullptr) throw std::runtime_error("cannot write " + path);
    buf_.reserve(1 << 20);
  }
  ~Out() {
    // Only reached without close(), when an exception is already on its way: nothing to report.
    if (f_ != nullptr) (void)std::fclose(f_);
  }
  Out(const Out&) = delete;
  Out& operator=(const Out&) = delete;
  void put(std::string_view s) {
    buf_.append(s);
    if (buf_.size() >= (1 << 20)) flush();
  }
  void num(double v) {
    char tmp[64];
    if (std::isnan(v)) {
      put("NaN");
      return;
    }
    if (std::isinf(v)) {
      put(v > 0 ? "+Inf" : "-Inf");
      return;
    }
    auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
    buf_.append(tmp, r.ptr);
  }
  void flush() {
    if (!buf_.empty() && std::fwrite(buf_.data(), 1, buf_.size(), f_) != buf_.size()) {
      throw std::runtime_error("short write of OpenMetrics text");
    }
    buf_.clear();
  }
  void close() {
    flush();
    if (std::fclose(f_) != 0) throw std::runtime_error("cannot close OpenMetrics file");
    f_ = nullptr;
  }

 private:
  std::FILE* f_ = nullptr;
  std::string buf_;
};

}  // namespace

double Scenario::jitter(const SeriesKey& k, double t, uint64_t salt) {
  const uint64_t h = mix(
      k.id ^ mix(static_cast<uint64_t>(std::llround(t * 1000)) ^ (salt * 0x9e3779b97f4a7c15ULL)));
  return static_cast<double>(h % 2000001) / 1000000.0 - 1.0;
}

Scenario::Scenario(ScenarioSpec spec) : spec_(std::move(spec)) {
  if (spec_.hosts.empty()) throw std::invalid_argument("a scenario needs hosts");
  // A fixed start (2026-11-21T13:00:00Z): the jitter is a function of absolute time, so a start
  // that moved with the clock gave each hour of the day different data (a verdict that held at
  // one hour failed at the next).
  if (spec_.start == 0) spec_.start = 1795266000;
  // The step schedule.
  const double stop_t = stop();
  double t = spec_.start + spec_.step_time_s * 2;  // startup (compilation) before the first step
  for (int64_t s = spec_.first_step;; ++s) {
    double dt = spec_.step_time_s;
    if (spec_.checkpoint_period && s > 0 && (s - 1) % *spec_.checkpoint_period == 0 &&
        s - 1 >= *spec_.checkpoint_period) {
      dt += spec_.checkpoint_extra_s;  // the step after a checkpoint step waits for the save
    }
    if (s > spec_.first_step) t += dt;
    if (t >= stop_t || t >= end()) break;
    steps_.emplace_back(s, t);
  }

  const double P = spec_.power_active_w;
  const double busy = spec_.power_busy_wait_w;
  auto training = [this](double tt) { return tt < stop(); };
  auto in_ckpt = [this](double tt) { return in_checkpoint(tt); };

  // GPU metrics.
  add("hw_gpu_power_watts", "gauge", Per::kGpu,
      [=](const SeriesKey& k, double tt) -> std::optional<double> {
        if (!training(tt)) return busy + 6 * jitter(k, tt, 1);
        if (in_ckpt(tt)) return 420 + 20 * jitter(k, tt, 1);
        return P + 15 * jitter(k, tt, 1);
      });
  add("hw_gpu_temperature_celsius", "gauge", Per::kGpu,
      [=](const SeriesKey& k, double tt) -> std::optional<double> {
        return (training(tt) ? 72 : 58) + 3 * jitter(k, tt, 2);
      });
  add("hw_gpu_clock_mhz", "gauge", Per::kGpu,
      [=](const SeriesKey& k, double tt) -> std::optional<double> {
        return 2100 + 30 * jitter(k, tt, 3);
      },
      {{"type", "sclk"}});
  add("hw_gpu_vram_used_bytes", "gauge", Per::kGpu,
      [=, this](const SeriesKey& k, double tt) -> std::optional<double> {
        return std::round((spec_.vram_total_gib * 0.78 + 2 * jitter(k, tt, 4)) * kGiB);
      });
  add("hw_gpu_vram_total_bytes", "gauge", Per::kGpu,
      [=, this](const SeriesKey&, double) -> std::optional<double> {
        return spec_.vram_total_gib * kGiB;
      });
  // Error counters count since boot: large, constant values that a job must never read as its own.
  for (const char* block : {"umc", "xgmi", "gfx", "mmhub", "sdma"}) {
    for (const char* kind : {"ue", "ce"}) {
      const double base = std::string(kind) == "ce" && std::string(block) == "umc" ? 37 : 0;
      add(std::string("hw_gpu_ras_") + block + "_" + kind + "_total", "counter", Per::kGpu,
          [=](const SeriesKey& k, double) -> std::optional<double> { return base * (k.gpu + 1); });
    }
  }
  for (const char* kind : {"correctable", "nonfatal", "fatal"}) {
    const double base = std::string(kind) == "correctable" ? 12 : 0;
    add(std::string("hw_gpu_pcie_") + kind + "_total", "counter", Per::kGpu,
        [=](const SeriesKey&, double) -> std::optional<double> { return base; });
  }
  add("ray_node_gpus_utilization", "gauge", Per::kGpu,
      [=](const SeriesKey& k, double tt) -> std::optional<double> {
        if (!training(tt)) return 100.0;
        if (in_ckpt(tt)) return 20 + 5 * jitter(k, tt, 5);
        return 97 + 2 * jitter(k, tt, 5);
      });

  // Host and network metrics.
  const double t0 = spec_.start;
  for (const char* dir : {"rx", "tx"}) {
    add(std::string("hw_net_") + dir + "_bytes_total", "counter", Per::kNic,
        [=](const SeriesKey&, double tt) -> std::optional<double> {
          return 5e12 + (tt - t0) * 2e8;
        });
    add(std::string("hw_net_") + dir + "_errors_total", "counter", Per::kNic,
        [=](const SeriesKey&, double) -> std::optional<double> { return 3; });
    add(std::string("hw_net_") + dir + "_drop_total", "counter", Per::kNic,
        [=](const SeriesKey&, double) -> std::optional<double> { return 120; });
  }
  add("hw_tcp_retransmits_total", "counter", Per::kHost,
      [=](const SeriesKey& k, double tt) -> std::optional<double> {
        return std::floor(4.1e6 + (tt - t0) * 0.5 + (k.host_index % 3));
      });
  for (const char* m : {"hw_tcp_listen_overflows_total", "hw_tcp_listen_drops_total",
                        "hw_tcp_estab_resets_total", "hw_tcp_abort_on_timeout_total"}) {
    add(m, "counter", Per::kHost,
        [=](const SeriesKey&, double) -> std::optional<double> { return 42; });
  }
  for (const char* dir : {"rx", "tx"}) {
    add(std::string("hw_rdma_") + dir + "_bytes_total", "counter", Per::kRdma,
        [=](const SeriesKey&, double tt) -> std::optional<double> {
          return 8e14 + (tt - t0) * 2.5e10;
        });
    add(std::string("hw_rdma_") + dir + "_pkts_total", "counter", Per::kRdma,
        [=](const SeriesKey&, double tt) -> std::optional<double> {
          return 2e11 + (tt - t0) * 6e6;
        });
    add(std::string("hw_rdma_") + dir + "_cnp_pkts_total", "counter", Per::kRdma,
        [=](const SeriesKey&, double) -> std::optional<double> { return 51234; });
  }
  // 90M retransmits since boot (weeks of earlier jobs): must never count against this job.
  add("hw_rdma_tx_retx_pkts_total", "counter", Per::kRdma,
      [=](const SeriesKey&, double) -> std::optional<double> { return 9.0e7; });
  add("hw_rdma_tx_retx_bytes_total", "counter", Per::kRdma,
      [=](const SeriesKey&, double) -> std::optional<double> { return 3.6e11; });
  for (const char* m : {"hw_rdma_tx_ack_timeout_total", "hw_rdma_req_rx_cqe_err_total",
                        "hw_rdma_req_tx_retry_excd_err_total"}) {
    add(m, "counter", Per::kRdma,
        [=](const SeriesKey&, double) -> std::optional<double> { return 17; });
  }
  add("hw_rdma_port_state", "gauge", Per::kRdma,
      [=](const SeriesKey&, double) -> std::optional<double> { return 1; });
  add("hw_procs_running", "gauge", Per::kHost,
      [=](const SeriesKey& k, double tt) -> std::optional<double> {
        return std::round(38 + 3 * jitter(k, tt, 6));
      });
  add("hw_procs_blocked", "gauge", Per::kHost,
      [=](const SeriesKey& k, double tt) -> std::optional<double> {
        return in_ckpt(tt) && k.host_index == 0 ? 14 : std::round(1 + jitter(k, tt, 7));
      });
  add("hw_context_switches_total", "counter", Per::kHost,
      [=](const SeriesKey&, double tt) -> std::optional<double> { return 9e9 + (tt - t0) * 2e5; });
  add("hw_oom_kills_total", "counter", Per::kHost,
      [=](const SeriesKey&, double) -> std::optional<double> { return 2; });
  add("hw_mem_dirty_bytes", "gauge", Per::kHost,
      [=](const SeriesKey& k, double tt) -> std::optional<double> {
        return std::round((in_ckpt(tt) && k.host_index == 0 ? 6e9 : 1.2e8) *
                          (1 + 0.1 * jitter(k, tt, 8)));
      });
  add("hw_mem_writeback_bytes", "gauge", Per::kHost,
      [=](const SeriesKey& k, double tt) -> std::optional<double> {
        return in_ckpt(tt) && k.host_index == 0 ? 2e9 : 0;
      });
  add("hw_io_pressure_some_pct", "gauge", Per::kHost,
      [=](const SeriesKey& k, double tt) -> std::optional<double> {
        return in_ckpt(tt) && k.host_index == 0 ? 70 : 1.0 + 0.5 * jitter(k, tt, 9);
      });
  add("hw_io_pressure_full_pct", "gauge", Per::kHost,
      [=](const SeriesKey& k, double tt) -> std::optional<double> {
        return in_ckpt(tt) && k.host_index == 0 ? 55 : 0.4 + 0.3 * jitter(k, tt, 10);
      });
  add("hw_io_pressure_some_avg300_pct", "gauge", Per::kHost,
      [=](const SeriesKey& k, double tt) -> std::optional<double> {
        return 1.0 + 0.2 * jitter(k, tt, 11);
      });
  add("hw_io_pressure_full_avg300_pct", "gauge", Per::kHost,
      [=](const SeriesKey& k, double tt) -> std::optional<double> {
        return 0.4 + 0.1 * jitter(k, tt, 12);
      });
  add("hw_io_pressure_full_total_us", "unknown", Per::kHost,
      [=](const SeriesKey&, double tt) -> std::optional<double> {
        return 7e11 + (tt - t0) * 4000;
      });
  add("hw_dmesg_gpu_errors_total", "counter", Per::kHost,
      [=](const SeriesKey&, double) -> std::optional<double> { return 0; });
  add("hw_gpu_user_processes", "gauge", Per::kHost,
      [=, this](const SeriesKey&, double) -> std::optional<double> { return spec_.gpus_per_host; });
  add("hw_scrape_duration_seconds", "gauge", Per::kHost,
      [=](const SeriesKey& k, double tt) -> std::optional<double> {
        return 0.12 + 0.05 * jitter(k, tt, 13);
      });
  add("ray_node_mem_used", "gauge", Per::kHost,
      [=, this](const SeriesKey& k, double tt) -> std::optional<double> {
        return std::round((spec_.host_mem_total_gib * 0.3 + 4 * jitter(k, tt, 14)) * kGiB);
      });
  add("ray_node_mem_total", "gauge", Per::kHost,
      [=, this](const SeriesKey&, double) -> std::optional<double> {
        return spec_.host_mem_total_gib * kGiB;
      });
  add("ray_node_cpu_utilization", "gauge", Per::kHost,
      [=](const SeriesKey& k, double tt) -> std::optional<double> {
        return 31 + 4 * jitter(k, tt, 15);
      });

  // Training metrics, from the first host; after training stops the bridge fills with stale values.
  auto fill = [this](double tt) {
    return tt >= stop() && !steps_.empty() && tt > steps_.back().second;
  };
  add("tb_step", "gauge", Per::kTb,
      [=, this](const SeriesKey&, double tt) -> std::optional<double> {
        auto s = step_at(tt);
        if (!s) return std::nullopt;
        return static_cast<double>(*s);
      });
  add("tb_metrics_plugin_staleness_fill", "gauge", Per::kTb,
      [=, this](const SeriesKey&, double tt) -> std::optional<double> {
        if (!step_at(tt)) return std::nullopt;
        return fill(tt) ? 1 : 0;
      });
  add("tb_learning_loss", "gauge", Per::kTb,
      [=, this](const SeriesKey&, double tt) -> std::optional<double> {
        auto s = step_at(tt);
        if (!s) return std::nullopt;
        return loss_of(*s);
      });
  add("tb_learning_grad_norm", "gauge", Per::kTb,
      [=, this](const SeriesKey& k, double tt) -> std::optional<double> {
        auto s = step_at(tt);
        if (!s) return std::nullopt;
        return 0.9 + 0.05 * jitter(k, static_cast<double>(*s), 16);
      });
  add("tb_learning_raw_grad_norm", "gauge", Per::kTb,
      [=, this](const SeriesKey& k, double tt) -> std::optional<double> {
        auto s = step_at(tt);
        if (!s) return std::nullopt;
        return 1.1 + 0.05 * jitter(k, static_cast<double>(*s), 17);
      });
  add("tb_learning_current_learning_rate", "gauge", Per::kTb,
      [=, this](const SeriesKey&, double tt) -> std::optional<double> {
        if (!step_at(tt)) return std::nullopt;
        return 3e-4;
      });
  add("tb_perf_step_time_seconds", "gauge", Per::kTb,
      [=, this](const SeriesKey&, double tt) -> std::optional<double> { return step_time_at(tt); });
  add("tb_perf_per_device_tokens_per_sec", "gauge", Per::kTb,
      [=, this](const SeriesKey&, double tt) -> std::optional<double> {
        auto st = step_time_at(tt);
        if (!st) return std::nullopt;
        return std::round(8192.0 * 30 / *st);
      });
}

double Scenario::stop() const {
  return spec_.stop_after_s ? spec_.start + *spec_.stop_after_s : end();
}

bool Scenario::in_checkpoint(double t) const {
  if (!spec_.checkpoint_period) return false;
  const auto i = last_index(t);
  if (i < 0) return false;
  const int64_t s = steps_[static_cast<size_t>(i)].first;
  // The save of the last step before a crash is still running until the crash.
  const bool next_or_running = static_cast<size_t>(i) + 1 < steps_.size() || t < stop();
  return s > 0 && s % *spec_.checkpoint_period == 0 && next_or_running;
}

void Scenario::silence(const std::string& host, double from) {
  for (auto& m : metrics_) {
    ValueFn inner = m.fn;
    m.fn = [inner, host, from](const SeriesKey& k, double t) -> std::optional<double> {
      if (k.host == host && t >= from) return std::nullopt;
      return inner(k, t);
    };
  }
}

int64_t Scenario::last_index(double t) const {
  const auto it =
      std::upper_bound(steps_.begin(), steps_.end(), t,
                       [](double v, const std::pair<int64_t, double>& s) { return v < s.second; });
  return static_cast<int64_t>(it - steps_.begin()) - 1;
}

std::optional<int64_t> Scenario::step_at(double t) const {
  const auto i = last_index(t);
  if (i < 0) return std::nullopt;
  return steps_[static_cast<size_t>(i)].first;
}

std::optional<double> Scenario::step_time_at(double t) const {
  const auto i = last_index(t);
  if (i < 0) return std::nullopt;
  if (i == 0) return spec_.step_time_s;
  return steps_[static_cast<size_t>(i)].second - steps_[static_cast<size_t>(i) - 1].second;
}

double Scenario::loss_of(int64_t step) const {
  // A decaying curve with a little deterministic wiggle, printed with four decimals in logs.
  const double base = 2.1 + (spec_.loss0 - 2.1) * std::exp(-static_cast<double>(step) / 150.0);
  SeriesKey k;
  k.id = 77;
  return std::round((base + 0.02 * jitter(k, static_cast<double>(step), 18)) * 10000) / 10000;
}

int64_t Scenario::last_step() const {
  return steps_.empty() ? -1 : steps_.back().first;
}
double Scenario::last_step_time() const {
  return steps_.empty() ? start() : steps_.back().second;
}

void Scenario::add(const std::string& name, const std::string& type, Per per, ValueFn fn,
                   std::vector<std::pair<std::string, std::string>> labels) {
  defaults_[name] = fn;
  metrics_.push_back(Metric{name, type, per, std::move(labels), std::move(fn)});
}

Scenario::Metric* Scenario::find(const std::string& name) {
  for (auto& m : metrics_) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

const Scenario::Metric* Scenario::find(const std::string& name) const {
  for (const auto& m : metrics_) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

void Scenario::set(const std::string& name, ValueFn fn) {
  Metric* m = find(name);
  if (m == nullptr) throw std::invalid_argument("no metric " + name + " in the scenario");
  m->fn = std::move(fn);
}

void Scenario::remove(const std::string& name) {
  std::erase_if(metrics_, [&](const Metric& m) { return m.name == name; });
}

bool Scenario::has(const std::string& name) const {
  return find(name) != nullptr;
}

ValueFn Scenario::base(const std::string& name) const {
  auto it = defaults_.find(name);
  if (it == defaults_.end()) throw std::invalid_argument("no metric " + name + " in the scenario");
  return it->second;
}

std::vector<SeriesKey> Scenario::keys(Per per) const {
  std::vector<SeriesKey> out;
  for (size_t h = 0; h < spec_.hosts.size(); ++h) {
    SeriesKey k;
    k.host = spec_.hosts[h];
    k.host_index = static_cast<int>(h);
    switch (per) {
      case Per::kTb:
        if (h != 0) break;
        [[fallthrough]];
      case Per::kHost:
        out.push_back(k);
        break;
      case Per::kNic:
        k.device = "eth0";
        out.push_back(k);
        break;
      case Per::kGpu:
        for (int g = 0; g < spec_.gpus_per_host; ++g) {
          k.gpu = g;
          out.push_back(k);
        }
        break;
      case Per::kRdma:
        for (int d = 0; d < spec_.rdma_per_host; ++d) {
          k.device = "mlx5_" + std::to_string(d);
          k.port = "1";
          out.push_back(k);
        }
        break;
    }
  }
  for (auto& k : out)
    k.id = mix(hash_str(k.host) ^ mix(static_cast<uint64_t>(k.gpu) + 7) ^ hash_str(k.device));
  return out;
}

std::pair<size_t, size_t> Scenario::size() const {
  size_t series = 0;
  for (const auto& m : metrics_)
    series += keys(m.per).size();
  const auto samples = static_cast<size_t>(std::ceil(spec_.duration_s / spec_.interval_s));
  return {series, series * samples};
}

void Scenario::write_openmetrics(const std::string& path, std::optional<double> from,
                                 std::optional<double> to) const {
  Out out(path);
  const double lo = from.value_or(start());
  const double hi = to.value_or(end());
  for (const auto& m : metrics_) {
    const std::string family = m.type == "counter" && m.name.size() > 6 &&
                                       m.name.compare(m.name.size() - 6, 6, "_total") == 0
                                   ? m.name.substr(0, m.name.size() - 6)
                                   : m.name;
    out.put("# TYPE ");
    out.put(family);
    out.put(" ");
    out.put(m.type);
    out.put("\n");
    for (const auto& k : keys(m.per)) {
      // The label block of this series, built once.
      std::string head =
          m.name + "{" + spec_.host_label + "=\"" + k.host + spec_.host_suffix + "\"";
      if (k.gpu >= 0) {
        head += m.name == "ray_node_gpus_utilization" ? ",GpuIndex=\"" : ",gpu=\"";
        head += std::to_string(k.gpu) + "\"";
        if (m.name == "ray_node_gpus_utilization" && !spec_.gpu_device_name.empty()) {
          head += ",GpuDeviceName=\"" + spec_.gpu_device_name + "\"";
        }
      }
      if (!k.device.empty()) head += ",device=\"" + k.device + "\"";
      if (!k.port.empty()) head += ",port=\"" + k.port + "\"";
      for (const auto& [lk, lv] : m.labels)
        head.append(",").append(lk).append("=\"").append(lv).append("\"");
      head += "} ";
      // Samples on the scrape grid, in time order.
      const auto first = static_cast<int64_t>(std::ceil((lo - start()) / spec_.interval_s - 1e-9));
      for (int64_t i = std::max<int64_t>(first, 0);; ++i) {
        const double t = start() + static_cast<double>(i) * spec_.interval_s;
        if (t >= hi || t >= end()) break;
        const auto v = m.fn(k, t);
        if (!v) continue;
        out.put(head);
        out.num(*v);
        out.put(" ");
        out.num(t);
        out.put("\n");
      }
    }
  }
  out.put("# EOF\n");
  out.close();
}

int run_program(const std::vector<std::string>& argv, std::string* output) {
  char tmpl[] = "/tmp/scenario-out-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  ::unlink(tmpl);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd, 1);
  posix_spawn_file_actions_adddup2(&fa, fd, 2);
  std::vector<char*> args;
  std::vector<std::string> copy = argv;
  args.reserve(copy.size() + 1);
  for (auto& a : copy)
    args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    ::close(fd);
    if (output != nullptr) *output = "cannot run " + argv[0] + ": " + std::strerror(rc);
    return 127;
  }
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (output != nullptr) {
    output->clear();
    ::lseek(fd, 0, SEEK_SET);
    char buf[4096];
    ssize_t n = 0;
    while ((n = ::read(fd, buf, sizeof buf)) > 0)
      output->append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void Scenario::build_tsdb(const std::string& job_dir, const std::string& work_dir) const {
  namespace fs = std::filesystem;
  const std::string prom = job_dir + "/prometheus";
  fs::create_directories(prom);
  const std::string work = work_dir.empty() ? job_dir : work_dir;
  fs::create_directories(work);
  // One file per two hours keeps promtool's memory and our disk use small for long scenarios.
  const double chunk = 7200;
  const double aligned = std::floor(start() / chunk) * chunk;
  for (int64_t n = 0;; ++n) {
    const double from = aligned + static_cast<double>(n) * chunk;
    if (from >= end()) break;
    const std::string om = work + "/scenario-" + std::to_string(static_cast<int64_t>(from)) + ".om";
    write_openmetrics(om, std::max(from, start()), std::min(from + chunk, end()));
    std::string out;
    const int rc = run_program(
        {"promtool", "tsdb", "create-blocks-from", "openmetrics", "-q", om, prom}, &out);
    if (rc != 0) {
      std::string why = "promtool failed (";
      why.append(std::to_string(rc)).append(") on ").append(om).append(": ").append(out);
      throw std::runtime_error(why);
    }
    std::error_code ec;
    fs::remove(om, ec);
  }
}

}  // namespace triage::tsdb::testing
