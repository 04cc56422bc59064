// Test and benchmark helper: a training job's metrics as the seed catalog names them (hw_*,
// ray_node_*, tb_*), written as OpenMetrics and turned into real TSDB blocks with
// `promtool tsdb create-blocks-from openmetrics` inside a job directory.
//
// A scenario starts as a healthy job (training power and utilisation, clean counters with large
// since-boot values, a tb_* step schedule with checkpoint saves) and a test changes only what its
// situation needs:
//
//   Scenario sc({.hosts = {"node001", "node002"}});
//   sc.set("hw_gpu_power_watts", [&](const SeriesKey& k, double t) -> std::optional<double> {
//     return t < sc.stop() ? 890 : 305;  // busy-wait after training stops
//   });
//   sc.build_tsdb(job_dir);
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace triage::tsdb::testing {

struct SeriesKey {
  std::string host;
  int host_index = 0;
  int gpu = -1;        // GPU metrics
  std::string device;  // RDMA device ("mlx5_0") or NIC ("eth0")
  std::string port;    // RDMA port
  uint64_t id = 0;     // stable per series (jitter seed)
};

using ValueFn = std::function<std::optional<double>(const SeriesKey&, double t)>;

struct ScenarioSpec {
  std::vector<std::string> hosts = {"node001", "node002"};
  int gpus_per_host = 2;
  int rdma_per_host = 2;
  double start = 0;  // epoch seconds; 0 = a whole hour a few hours before now
  double duration_s = 3600;
  double interval_s = 15;
  // Training: a step every step_time_s; the step after a checkpoint step takes checkpoint_extra_s
  // longer; training stops (hang, crash) at start + stop_after_s when set.
  double step_time_s = 30;
  int64_t first_step = 0;
  std::optional<int64_t> checkpoint_period;
  double checkpoint_extra_s = 120;
  std::optional<double> stop_after_s;
  double loss0 = 9.0;
  std::string gpu_device_name = "AMD Instinct MI355X";  // Ray's GpuDeviceName label ("" = none)
  double vram_total_gib = 288;
  double power_active_w = 890;
  double power_busy_wait_w = 300;
  double host_mem_total_gib = 1536;
  // How series name their node: the per-job TSDB uses host="node001"; a cluster Prometheus
  // often instance="node001:9100".
  std::string host_label = "host";
  std::string host_suffix;
};

class Scenario {
 public:
  explicit Scenario(ScenarioSpec spec = {});
  // The generators refer to the scenario itself: it stays where it was made.
  Scenario(const Scenario&) = delete;
  Scenario& operator=(const Scenario&) = delete;

  const ScenarioSpec& spec() const { return spec_; }
  double start() const { return spec_.start; }
  double end() const { return spec_.start + spec_.duration_s; }
  double at(double offset_s) const { return spec_.start + offset_s; }
  // When training stopped (end() when it never did).
  double stop() const;
  const std::string& tb_host() const { return spec_.hosts.front(); }

  // The step schedule: (step, completion time), in order.
  const std::vector<std::pair<int64_t, double>>& steps() const { return steps_; }
  std::optional<int64_t> step_at(double t) const;
  std::optional<double> step_time_at(double t) const;  // duration of the last completed step
  double loss_of(int64_t step) const;
  int64_t last_step() const;
  double last_step_time() const;

  // True from a checkpoint step's completion until the next step completes (the save).
  bool in_checkpoint(double t) const;
  // Every series of `host` stops at `from` (a node that died: nothing scrapes it any more).
  void silence(const std::string& host, double from);

  // Replaces the generator of one stored metric name ("hw_gpu_power_watts",
  // "hw_tcp_retransmits_total"); nullopt from a generator leaves the sample out.
  void set(const std::string& name, ValueFn fn);
  void remove(const std::string& name);
  bool has(const std::string& name) const;
  // The default (healthy) generator, for overrides that only change part of the picture.
  ValueFn base(const std::string& name) const;

  // Deterministic noise in [-1, 1] for a series at a time.
  static double jitter(const SeriesKey& k, double t, uint64_t salt = 0);

  // Writes the OpenMetrics text (samples with from <= t < to, default everything).
  void write_openmetrics(const std::string& path, std::optional<double> from = std::nullopt,
                         std::optional<double> to = std::nullopt) const;
  // <job_dir>/prometheus/ with real blocks (promtool), creating directories as needed. The
  // OpenMetrics files go to `work_dir` (default: job_dir) and are removed afterwards. Throws
  // std::runtime_error with promtool's output when it fails.
  void build_tsdb(const std::string& job_dir, const std::string& work_dir = "") const;
  // Number of series and samples write_openmetrics produces.
  std::pair<size_t, size_t> size() const;

 private:
  enum class Per { kHost, kGpu, kRdma, kNic, kTb };
  struct Metric {
    std::string name;
    std::string type;  // gauge | counter | unknown
    Per per;
    std::vector<std::pair<std::string, std::string>> labels;  // constant extra labels
    ValueFn fn;
  };
  void add(const std::string& name, const std::string& type, Per per, ValueFn fn,
           std::vector<std::pair<std::string, std::string>> labels = {});
  std::vector<SeriesKey> keys(Per per) const;
  int64_t last_index(double t) const;  // index of the last step completed at t, or -1
  Metric* find(const std::string& name);
  const Metric* find(const std::string& name) const;

  ScenarioSpec spec_;
  std::vector<std::pair<int64_t, double>> steps_;
  std::vector<Metric> metrics_;
  std::map<std::string, ValueFn> defaults_;
};

// Runs a program and returns its exit status (0 = success) with stdout+stderr in *output.
int run_program(const std::vector<std::string>& argv, std::string* output);

}  // namespace triage::tsdb::testing
