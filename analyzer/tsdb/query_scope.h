// PromQL building blocks scoped to one job: the host label, the job's hosts as a matcher, window
// durations, and a querier that records every query (and a bounded part of its answer) as
// evidence for the report. A failed query is recorded and answered with nothing, so that one bad
// metric never stops a playbook.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/tsdb/prom_client.h"
#include "analyzer/tsdb/tsdb.h"

namespace triage::tsdb {

class Scope {
 public:
  Scope(std::string host_label, std::vector<std::string> hosts);

  const std::string& host_label() const { return host_label_; }
  const std::vector<std::string>& hosts() const { return hosts_; }
  void set_hosts(std::vector<std::string> hosts) { hosts_ = std::move(hosts); }

  // `metric{<host>=~"...",extra}` for the job's hosts; `only` narrows to some of them.
  std::string sel(const std::string& metric, const std::string& extra = "") const;
  std::string sel_hosts(const std::string& metric, const std::vector<std::string>& only,
                        const std::string& extra = "") const;
  // The matcher alone (`host=~"(a|b)(:[0-9]+)?"`), empty when no hosts are set.
  std::string matcher(const std::vector<std::string>& only) const;

  // The job host a series belongs to: its host label, with a ":port" or domain suffix matched
  // back to a job host (a cluster Prometheus labels nodes "node001:9100" or by FQDN).
  std::string host_of(const Labels& labels) const;

 private:
  std::string host_label_;
  std::vector<std::string> hosts_;
};

// The GPU a series belongs to: the `gpu` label of hw_gpu_*, Ray's `GpuIndex`.
std::string gpu_of(const Labels& labels);
// "host:gpu", or "host" when there is no GPU label.
std::string host_gpu(const Scope& scope, const Labels& labels);

// Concatenation without the temporaries of a chain of operator+ (queries are built in loops).
template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::string out;
  (out.append(std::string_view(parts)), ...);
  return out;
}

// `name="value"` with the value escaped for a PromQL string.
std::string label_eq(const std::string& name, const std::string& value);
// The device/port matcher of an RDMA series (`device="mlx5_0",port="1"`), empty without them.
std::string device_matcher(const Labels& labels);
// "mlx5_0/1" for an RDMA series, "eth0" for a NIC, "" otherwise.
std::string device_of(const Labels& labels);

// A PromQL duration for `seconds` ("3600s"), at least one second.
std::string dur(double seconds);
// A range selector's window, "[3600s]", and a subquery's, "[3600s:10s]". Built by appending: gcc 12
// at -O3 reports a false -Wrestrict in `"[" + std::string + "]"` (GCC bug 105651).
std::string range_window(double seconds);
std::string subquery_window(double range_s, double step_s);
// A regex-safe, PromQL-string-safe alternative of literal values: "(a|b\\.c)".
std::string regex_alternatives(const std::vector<std::string>& values);

class Querier {
 public:
  explicit Querier(PromClient& client) : client_(client) {}

  // Instant query at `time`; scalar and vector results come back as samples.
  std::vector<Sample> instant(const std::string& q, double time, std::vector<QueryRecord>* sink);
  std::vector<Series> range(const std::string& q, double start, double end, double step,
                            std::vector<QueryRecord>* sink);
  // The raw samples of `selector` within (time - window, time].
  std::vector<Series> raw(const std::string& selector, double time, double window_s,
                          std::vector<QueryRecord>* sink);

  // /api/v1/label/<label>/values restricted by selectors and a time range.
  std::vector<std::string> labels(const std::string& label, const std::vector<std::string>& match,
                                  double start, double end, std::vector<QueryRecord>* sink);

  int failures() const { return failures_; }
  const std::string& last_error() const { return last_error_; }
  // True once the server stopped answering at all (connection refused, timeouts): the remaining
  // queries are skipped instead of each waiting for its own timeout.
  bool broken() const { return broken_; }

  static constexpr size_t kMaxRowsKept = 48;

 private:
  void fail(QueryRecord& rec, const PromError& e);
  // Runs one request: skipped once the server is gone, timed, failures recorded, then filed.
  void run(QueryRecord rec, std::vector<QueryRecord>* sink,
           const std::function<void(QueryRecord&)>& body);

  PromClient& client_;
  int failures_ = 0;
  int connection_failures_ = 0;
  bool broken_ = false;
  std::string last_error_;
};

}  // namespace triage::tsdb
