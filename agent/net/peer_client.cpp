#include "agent/net/peer_client.h"

#include <curl/curl.h>

#include <memory>
#include <mutex>

#include "agent/net/munge_auth.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage::agent {

namespace {

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  std::string body;
  size_t max_body = 0;
  bool too_big = false;
  bool done = false;
  CURLcode result = CURLE_OK;
  char errbuf[CURL_ERROR_SIZE] = {};

  Transfer() = default;
  Transfer(const Transfer&) = delete;
  Transfer& operator=(const Transfer&) = delete;
  ~Transfer() {
    if (easy != nullptr) curl_easy_cleanup(easy);
    curl_slist_free_all(headers);
  }
};

size_t on_body(char* data, size_t size, size_t nmemb, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * nmemb;
  if (t->body.size() + n > t->max_body) {
    t->too_big = true;
    return 0;  // aborts the transfer
  }
  t->body.append(data, n);
  return n;
}

std::string first_line(const std::string& s) {
  const size_t nl = s.find('\n');
  std::string l = s.substr(0, std::min<size_t>(nl, 200));
  while (!l.empty() && (l.back() == '\r' || l.back() == ' '))
    l.pop_back();
  return l;
}

}  // namespace

std::vector<PeerResponse> fetch_from_peers(const std::vector<PeerRequest>& requests,
                                           const PeerFetchOptions& options) {
  init_curl_once();
  std::vector<PeerResponse> out(requests.size());
  std::vector<std::unique_ptr<Transfer>> transfers(requests.size());
  CURLM* multi = curl_multi_init();
  if (multi == nullptr) {
    for (size_t i = 0; i < requests.size(); ++i) {
      out[i].host = requests[i].host;
      out[i].error = "cannot initialise libcurl";
    }
    return out;
  }
  const long timeout = static_cast<long>(options.timeout_ms);
  for (size_t i = 0; i < requests.size(); ++i) {
    const PeerRequest& r = requests[i];
    out[i].host = r.host;
    std::string error;
    const auto cred = munge_credential(
        options.munge_socket, r.carried.empty() ? r.target : r.target + "\n" + r.carried, error);
    if (!cred) {
      out[i].error = error;
      continue;
    }
    auto t = std::make_unique<Transfer>();
    t->easy = curl_easy_init();
    t->max_body = options.max_body;
    if (t->easy == nullptr) {
      out[i].error = "cannot initialise libcurl";
      continue;
    }
    const std::string url = r.base_url + r.target;
    const std::string auth = "Authorization: Munge " + *cred;
    t->headers = curl_slist_append(t->headers, auth.c_str());
    curl_easy_setopt(t->easy, CURLOPT_URL, url.c_str());
    curl_easy_setopt(t->easy, CURLOPT_HTTPHEADER, t->headers);
    if (!r.carried.empty()) {
      curl_easy_setopt(t->easy, CURLOPT_POST, 1L);
      curl_easy_setopt(t->easy, CURLOPT_POSTFIELDS, "");
      curl_easy_setopt(t->easy, CURLOPT_POSTFIELDSIZE, 0L);
    }
    curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(t->easy, CURLOPT_WRITEDATA, t.get());
    curl_easy_setopt(t->easy, CURLOPT_ERRORBUFFER, t->errbuf);
    curl_easy_setopt(t->easy, CURLOPT_TIMEOUT_MS, timeout);
    curl_easy_setopt(t->easy, CURLOPT_CONNECTTIMEOUT_MS, timeout);
    curl_easy_setopt(t->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(t->easy, CURLOPT_PROTOCOLS_STR, "http,https");
    // A proxy from the environment must never see cluster-internal traffic.
    curl_easy_setopt(t->easy, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(t->easy, CURLOPT_PRIVATE, t.get());  // heap-owned: moving t keeps it
    curl_multi_add_handle(multi, t->easy);
    transfers[i] = std::move(t);
  }

  const int64_t deadline = monotonic_usec() + options.timeout_ms * 1000 + 500000;
  int running = 0;
  do {
    curl_multi_perform(multi, &running);
    int queued = 0;
    while (CURLMsg* m = curl_multi_info_read(multi, &queued)) {
      if (m->msg != CURLMSG_DONE) continue;
      char* priv = nullptr;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
      auto* finished = reinterpret_cast<Transfer*>(priv);
      finished->done = true;
      finished->result = m->data.result;
    }
    if (running == 0) break;
    curl_multi_poll(multi, nullptr, 0, 100, nullptr);
  } while (monotonic_usec() < deadline);

  for (size_t i = 0; i < requests.size(); ++i) {
    Transfer* t = transfers[i].get();
    if (t == nullptr) continue;
    PeerResponse& resp = out[i];
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &resp.status);
    if (!t->done) {
      resp.error = "timed out after " + std::to_string(options.timeout_ms / 1000) + "s";
    } else if (t->too_big) {
      resp.error = "answer larger than " + std::to_string(options.max_body) + " bytes";
    } else if (t->result != CURLE_OK) {
      resp.error = t->errbuf[0] != '\0' ? t->errbuf : curl_easy_strerror(t->result);
    } else if (resp.status != 200) {
      resp.error = "HTTP " + std::to_string(resp.status) + ": " + first_line(t->body);
    } else {
      resp.ok = true;
      resp.body = std::move(t->body);
    }
    curl_multi_remove_handle(multi, t->easy);
  }
  transfers.clear();
  curl_multi_cleanup(multi);
  return out;
}

std::string peer_base_url(const std::string& node, int default_port) {
  const size_t colon = node.rfind(':');
  const bool has_port =
      colon != std::string::npos && parse_uint(std::string_view(node).substr(colon + 1));
  return has_port ? "http://" + node : "http://" + node + ":" + std::to_string(default_port);
}

}  // namespace triage::agent
