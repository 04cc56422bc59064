#include "analyzer/tsdb/prom_client.h"

#include <curl/curl.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>

#include <nlohmann/json.hpp>

#include "common/text.h"
#include "common/time_util.h"

namespace triage::tsdb {

namespace {

using json = nlohmann::json;

void global_init_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Body {
  std::string data;
  size_t cap = 0;
  bool too_large = false;
};

size_t on_body(char* ptr, size_t size, size_t nmemb, void* userdata) {
  auto* b = static_cast<Body*>(userdata);
  const size_t n = size * nmemb;
  if (b->data.size() + n > b->cap) {
    b->too_large = true;
    return 0;  // makes curl abort the transfer with CURLE_WRITE_ERROR
  }
  b->data.append(ptr, n);
  return n;
}

std::string escape(CURL* c, const std::string& s) {
  char* e = curl_easy_escape(c, s.data(), static_cast<int>(s.size()));
  if (e == nullptr) throw PromError(PromError::Kind::kDecode, "cannot URL-encode a parameter");
  std::string out(e);
  curl_free(e);
  return out;
}

std::string encode_params(CURL* c, const std::vector<std::pair<std::string, std::string>>& params) {
  std::string out;
  for (const auto& [k, v] : params) {
    if (!out.empty()) out += '&';
    out += escape(c, k);
    out += '=';
    out += escape(c, v);
  }
  return out;
}

// Keeps error messages readable when a query is long (host regexes for 64 nodes).
std::string shorten(std::string_view s, size_t max = 160) {
  if (s.size() <= max) return std::string(s);
  return std::string(truncate_utf8(s, max)) + "...";
}

double number_of(const json& j, const std::string& what) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    if (auto v = parse_prom_value(j.get_ref<const std::string&>())) return *v;
  }
  throw PromError(PromError::Kind::kDecode,
                  what + ": expected a number, got " + shorten(j.dump(), 40));
}

Point point_of(const json& pair, const std::string& what) {
  if (!pair.is_array() || pair.size() != 2) {
    throw PromError(PromError::Kind::kDecode, what + ": expected a [time, value] pair");
  }
  return Point{number_of(pair[0], what), number_of(pair[1], what)};
}

Labels labels_of(const json& j, const std::string& what) {
  Labels out;
  if (j.is_null()) return out;
  if (!j.is_object())
    throw PromError(PromError::Kind::kDecode, what + ": \"metric\" is not an object");
  for (const auto& [k, v] : j.items()) {
    if (!v.is_string())
      throw PromError(PromError::Kind::kDecode,
                      what + ": label " + std::string(k) + " is not a string");
    out.emplace(k, v.get<std::string>());
  }
  return out;
}

std::vector<Series> matrix_of(const json& result, const std::string& what) {
  if (!result.is_array())
    throw PromError(PromError::Kind::kDecode, what + ": result is not an array");
  std::vector<Series> out;
  out.reserve(result.size());
  for (const auto& r : result) {
    if (!r.is_object())
      throw PromError(PromError::Kind::kDecode, what + ": a series is not an object");
    Series s;
    s.labels = labels_of(r.contains("metric") ? r.at("metric") : json(), what);
    auto it = r.find("values");
    if (it == r.end() || !it->is_array()) {
      throw PromError(PromError::Kind::kDecode, what + ": a series has no \"values\" array");
    }
    s.points.reserve(it->size());
    for (const auto& p : *it)
      s.points.push_back(point_of(p, what));
    out.push_back(std::move(s));
  }
  return out;
}

// json::value() throws when the member has another type; an answer from a stranger must not.
std::string str_member(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int64_t int_member(const json& j, const char* key, int64_t fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

std::vector<std::string> warnings_of(const json& body) {
  std::vector<std::string> out;
  auto it = body.find("warnings");
  if (it != body.end() && it->is_array()) {
    for (const auto& w : *it) {
      if (w.is_string()) out.push_back(w.get<std::string>());
    }
  }
  return out;
}

}  // namespace

std::optional<double> parse_prom_value(std::string_view s) {
  if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (s == "+Inf" || s == "Inf") return std::numeric_limits<double>::infinity();
  if (s == "-Inf") return -std::numeric_limits<double>::infinity();
  return parse_double(s);
}

std::string format_prom_time(double seconds) {
  char buf[64];
  (void)std::snprintf(buf, sizeof buf, "%.3f", seconds);
  return buf;
}

json decode_api_body(std::string_view body, long http_status, const std::string& what) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    if (http_status != 200) {
      throw PromError(PromError::Kind::kHttp, what + ": HTTP " + std::to_string(http_status) +
                                                  ": " + printable(shorten(body, 200)));
    }
    throw PromError(PromError::Kind::kDecode, what + ": the answer is not a JSON object");
  }
  const std::string status = str_member(j, "status");
  if (status == "error") {
    throw PromError(PromError::Kind::kApi, what + ": " + str_member(j, "errorType") + ": " +
                                               printable(shorten(str_member(j, "error"), 400)));
  }
  if (status != "success") {
    throw PromError(PromError::Kind::kDecode,
                    what + ": answer has status \"" + printable(status) + "\"");
  }
  if (http_status != 200) {
    throw PromError(PromError::Kind::kHttp, what + ": HTTP " + std::to_string(http_status));
  }
  if (!j.contains("data"))
    throw PromError(PromError::Kind::kDecode, what + ": answer has no \"data\"");
  return j;
}

InstantResult decode_instant(const json& body, const std::string& what) {
  InstantResult out;
  out.warnings = warnings_of(body);
  const json& data = body.at("data");
  if (!data.is_object())
    throw PromError(PromError::Kind::kDecode, what + ": \"data\" is not an object");
  const std::string type = str_member(data, "resultType");
  const json& result = data.contains("result") ? data.at("result") : json();
  if (type == "vector") {
    if (!result.is_array())
      throw PromError(PromError::Kind::kDecode, what + ": result is not an array");
    out.samples.reserve(result.size());
    for (const auto& r : result) {
      if (!r.is_object())
        throw PromError(PromError::Kind::kDecode, what + ": a sample is not an object");
      auto it = r.find("value");
      if (it == r.end())
        throw PromError(PromError::Kind::kDecode, what + ": a sample has no \"value\"");
      out.samples.push_back(Sample{labels_of(r.contains("metric") ? r.at("metric") : json(), what),
                                   point_of(*it, what)});
    }
  } else if (type == "scalar") {
    out.samples.push_back(Sample{{}, point_of(result, what)});
  } else if (type == "matrix") {
    out.series = matrix_of(result, what);
  } else {
    throw PromError(PromError::Kind::kDecode,
                    what + ": unexpected result type \"" + printable(type) + "\"");
  }
  return out;
}

RangeResult decode_range(const json& body, const std::string& what) {
  RangeResult out;
  out.warnings = warnings_of(body);
  const json& data = body.at("data");
  if (!data.is_object() || str_member(data, "resultType") != "matrix") {
    throw PromError(PromError::Kind::kDecode, what + ": a range query must answer with a matrix");
  }
  out.series = matrix_of(data.at("result"), what);
  return out;
}

PromClient::PromClient(std::string base_url, PromClientOptions options)
    : base_url_(std::move(base_url)), options_(options) {
  while (!base_url_.empty() && base_url_.back() == '/')
    base_url_.pop_back();
  global_init_once();
  curl_ = curl_easy_init();
  if (curl_ == nullptr) throw PromError(PromError::Kind::kConnect, "curl_easy_init failed");
}

PromClient::PromClient(PromClient&& o) noexcept
    : base_url_(std::move(o.base_url_)),
      options_(o.options_),
      curl_(std::exchange(o.curl_, nullptr)),
      requests_(o.requests_),
      seconds_waiting_(o.seconds_waiting_) {}

PromClient& PromClient::operator=(PromClient&& o) noexcept {
  if (this != &o) {
    if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
    base_url_ = std::move(o.base_url_);
    options_ = o.options_;
    curl_ = std::exchange(o.curl_, nullptr);
    requests_ = o.requests_;
    seconds_waiting_ = o.seconds_waiting_;
  }
  return *this;
}

PromClient::~PromClient() {
  if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

json PromClient::call(const std::string& path,
                      const std::vector<std::pair<std::string, std::string>>& params, bool post,
                      const std::string& what) {
  auto* c = static_cast<CURL*>(curl_);
  if (c == nullptr) throw PromError(PromError::Kind::kConnect, what + ": client was moved from");
  curl_easy_reset(c);
  std::string url = base_url_ + path;
  const std::string form = encode_params(c, params);
  if (!post && !form.empty()) url += "?" + form;
  Body body;
  body.cap = options_.max_response_bytes;
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options_.connect_timeout.count()));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.request_timeout.count()));
  // Our own servers are on loopback; a site proxy must never be asked to reach them.
  curl_easy_setopt(c, CURLOPT_NOPROXY, "localhost,127.0.0.1,::1");
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");  // gzip: range answers compress ~10x
  curl_easy_setopt(c, CURLOPT_USERAGENT, "slurm-triage");
  if (post) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, form.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(form.size()));
  }
  const int64_t t0 = monotonic_usec();
  const CURLcode rc = curl_easy_perform(c);
  seconds_waiting_ += static_cast<double>(monotonic_usec() - t0) / 1e6;
  ++requests_;
  if (body.too_large) {
    throw PromError(PromError::Kind::kTooLarge,
                    what + ": answer larger than " +
                        std::to_string(options_.max_response_bytes >> 20) + " MiB");
  }
  if (rc != CURLE_OK) {
    const std::string detail = errbuf[0] != '\0' ? std::string(errbuf) : curl_easy_strerror(rc);
    const auto kind =
        rc == CURLE_OPERATION_TIMEDOUT ? PromError::Kind::kTimeout : PromError::Kind::kConnect;
    throw PromError(kind, what + ": " + base_url_ + ": " + detail);
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  return decode_api_body(body.data, status, what);
}

bool PromClient::ready(std::chrono::milliseconds timeout) {
  auto* c = static_cast<CURL*>(curl_);
  if (c == nullptr) return false;
  curl_easy_reset(c);
  const std::string url = base_url_ + "/-/ready";
  Body body;
  body.cap = 4096;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "localhost,127.0.0.1,::1");
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
  if (curl_easy_perform(c) != CURLE_OK) return false;
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  return status == 200;
}

InstantResult PromClient::query(const std::string& promql, double time) {
  const std::string what = "query " + shorten(promql);
  return decode_instant(
      call("/api/v1/query", {{"query", promql}, {"time", format_prom_time(time)}}, true, what),
      what);
}

RangeResult PromClient::query_range(const std::string& promql, double start, double end,
                                    double step) {
  const std::string what = "query_range " + shorten(promql);
  if (!(step > 0) || !(end >= start)) {
    throw PromError(PromError::Kind::kApi, what + ": invalid range (start > end or step <= 0)");
  }
  return decode_range(call("/api/v1/query_range",
                           {{"query", promql},
                            {"start", format_prom_time(start)},
                            {"end", format_prom_time(end)},
                            {"step", format_prom_time(step)}},
                           true, what),
                      what);
}

std::vector<std::string> PromClient::label_values(const std::string& label,
                                                  const std::vector<std::string>& match,
                                                  std::optional<double> start,
                                                  std::optional<double> end) {
  const std::string what = "label values of " + shorten(label, 60);
  std::vector<std::pair<std::string, std::string>> params;
  params.reserve(match.size() + 2);
  for (const auto& m : match)
    params.emplace_back("match[]", m);
  if (start) params.emplace_back("start", format_prom_time(*start));
  if (end) params.emplace_back("end", format_prom_time(*end));
  auto* c = static_cast<CURL*>(curl_);
  const json body = call("/api/v1/label/" + escape(c, label) + "/values", params, false, what);
  const json& data = body.at("data");
  std::vector<std::string> out;
  if (data.is_null()) return out;
  if (!data.is_array())
    throw PromError(PromError::Kind::kDecode, what + ": \"data\" is not an array");
  for (const auto& v : data) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

std::vector<Labels> PromClient::series(const std::vector<std::string>& match, double start,
                                       double end) {
  const std::string what = "series " + shorten(match.empty() ? std::string() : match.front());
  std::vector<std::pair<std::string, std::string>> params;
  params.reserve(match.size() + 2);
  for (const auto& m : match)
    params.emplace_back("match[]", m);
  params.emplace_back("start", format_prom_time(start));
  params.emplace_back("end", format_prom_time(end));
  const json body = call("/api/v1/series", params, true, what);
  const json& data = body.at("data");
  std::vector<Labels> out;
  if (data.is_null()) return out;
  if (!data.is_array())
    throw PromError(PromError::Kind::kDecode, what + ": \"data\" is not an array");
  for (const auto& s : data)
    out.push_back(labels_of(s, what));
  return out;
}

TsdbStatus PromClient::tsdb_status() {
  const std::string what = "status/tsdb";
  const json body = call("/api/v1/status/tsdb", {}, false, what);
  const json& data = body.at("data");
  TsdbStatus out;
  if (!data.is_object())
    throw PromError(PromError::Kind::kDecode, what + ": \"data\" is not an object");
  if (auto h = data.find("headStats"); h != data.end() && h->is_object()) {
    out.head_series = int_member(*h, "numSeries", 0);
    const int64_t mn = int_member(*h, "minTime", std::numeric_limits<int64_t>::max());
    const int64_t mx = int_member(*h, "maxTime", std::numeric_limits<int64_t>::min());
    // An empty head reports min == max (the end of the last block) or the int64 sentinels.
    if (out.head_series > 0 && mn < mx) {
      out.head_min_ms = mn;
      out.head_max_ms = mx;
    }
  }
  if (auto s = data.find("seriesCountByMetricName"); s != data.end() && s->is_array()) {
    for (const auto& e : *s) {
      if (e.is_object() && e.contains("name") && e["name"].is_string()) {
        out.series_by_metric.emplace_back(e["name"].get<std::string>(), int_member(e, "value", 0));
      }
    }
  }
  return out;
}

std::map<std::string, std::string> PromClient::flags() {
  const json body = call("/api/v1/status/flags", {}, false, "status/flags");
  std::map<std::string, std::string> out;
  const json& data = body.at("data");
  if (!data.is_object())
    throw PromError(PromError::Kind::kDecode, "status/flags: \"data\" is not an object");
  for (const auto& [k, v] : data.items()) {
    if (v.is_string()) out.emplace(k, v.get<std::string>());
  }
  return out;
}

}  // namespace triage::tsdb
