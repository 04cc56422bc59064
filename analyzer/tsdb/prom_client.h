// A small client for the Prometheus HTTP API (v1): instant and range queries, label values,
// series, and the status endpoints. Every call is bounded in time and size and fails with a
// PromError that names the endpoint, the query and what went wrong, never with a crash or a hang.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace triage::tsdb {

using Labels = std::map<std::string, std::string>;

// One value at one time. Prometheus sends values as strings; "NaN", "+Inf" and "-Inf" are valid
// and arrive here as the corresponding doubles.
struct Point {
  double t = 0;  // seconds since the epoch
  double v = 0;
};

// An element of an instant vector.
struct Sample {
  Labels labels;
  Point point;
};

// An element of a range vector (matrix): every point of one series.
struct Series {
  Labels labels;
  std::vector<Point> points;
};

struct InstantResult {
  std::vector<Sample> samples;  // vector results; a scalar result is one sample without labels
  std::vector<Series> series;   // a range selector evaluated as an instant query gives a matrix
  std::vector<std::string> warnings;
};

struct RangeResult {
  std::vector<Series> series;
  std::vector<std::string> warnings;
};

// What /api/v1/status/tsdb says about the head block (persisted blocks are not covered).
struct TsdbStatus {
  int64_t head_series = 0;
  std::optional<int64_t> head_min_ms;  // absent when the head holds no samples
  std::optional<int64_t> head_max_ms;
  std::vector<std::pair<std::string, int64_t>> series_by_metric;  // the server's top 10
};

class PromError : public std::runtime_error {
 public:
  enum class Kind {
    kConnect,   // refused, unreachable, DNS
    kTimeout,   // connect or transfer deadline passed
    kHttp,      // a status other than 200 without a usable API error
    kApi,       // {"status":"error"} (bad query, execution error, timeout on the server)
    kDecode,    // not the JSON shape the API documents
    kTooLarge,  // the answer exceeded the size cap
  };
  PromError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

struct PromClientOptions {
  std::chrono::milliseconds connect_timeout{3000};
  std::chrono::milliseconds request_timeout{60000};
  size_t max_response_bytes = size_t{256} << 20;
};

// Parses the value half of a Prometheus [time, "value"] pair.
std::optional<double> parse_prom_value(std::string_view s);

// Formats a time for the API: seconds with millisecond precision, no exponent.
std::string format_prom_time(double seconds);

class PromClient {
 public:
  // `base_url` is "http://host:port" with an optional path prefix ("https://prom/cluster").
  explicit PromClient(std::string base_url, PromClientOptions options = {});
  PromClient(const PromClient&) = delete;
  PromClient& operator=(const PromClient&) = delete;
  PromClient(PromClient&&) noexcept;
  PromClient& operator=(PromClient&&) noexcept;
  ~PromClient();

  const std::string& base_url() const { return base_url_; }

  // GET /-/ready: true on 200, false on any other answer or a connection failure.
  bool ready(std::chrono::milliseconds timeout);

  InstantResult query(const std::string& promql, double time);
  RangeResult query_range(const std::string& promql, double start, double end, double step);
  // /api/v1/label/<name>/values, optionally restricted by series selectors and a time range.
  std::vector<std::string> label_values(const std::string& label,
                                        const std::vector<std::string>& match = {},
                                        std::optional<double> start = std::nullopt,
                                        std::optional<double> end = std::nullopt);
  std::vector<Labels> series(const std::vector<std::string>& match, double start, double end);
  TsdbStatus tsdb_status();
  // /api/v1/status/flags: the server's command-line flags.
  std::map<std::string, std::string> flags();

  // Counters, for the report's "how much did we ask" line.
  int requests() const { return requests_; }
  double seconds_waiting() const { return seconds_waiting_; }

 private:
  nlohmann::json call(const std::string& path,
                      const std::vector<std::pair<std::string, std::string>>& params, bool post,
                      const std::string& what);

  std::string base_url_;
  PromClientOptions options_;
  void* curl_ = nullptr;  // CURL*, reused so that connections are kept alive
  int requests_ = 0;
  double seconds_waiting_ = 0;
};

// Checks an API answer body ({"status": ..., "data": ..., "warnings": ...}) and returns it parsed;
// throws PromError. decode_instant/decode_range read such a body. Exposed for tests.
nlohmann::json decode_api_body(std::string_view body, long http_status, const std::string& what);
InstantResult decode_instant(const nlohmann::json& data, const std::string& what);
RangeResult decode_range(const nlohmann::json& data, const std::string& what);

}  // namespace triage::tsdb
