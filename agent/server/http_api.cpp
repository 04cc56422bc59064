#include "agent/server/http_api.h"

#include <sys/socket.h>

#include <netdb.h>
#include <netinet/in.h>

#include <cerrno>
#include <optional>

#include <spdlog/spdlog.h>

#include "agent/net/munge_auth.h"
#include "agent/node/attribution.h"
#include "common/safe_io.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage::agent {

namespace {

std::string json_body(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string error_response(int status, const std::string& why) {
  return http_response(status, "application/json", json_body({{"error", why}}));
}

// What a client refused for the server's limits reads: 503 with a hint to come back shortly.
std::string busy_response(const std::string& why) {
  return http_response(503, "application/json", json_body({{"error", "busy: " + why}}),
                       "Retry-After: 1\r\n");
}

constexpr int kScrapeTag = 1;  // StreamServer::Conn::tag of a /metrics answer

// "/v1/jobs/4242/events" -> 4242
std::optional<uint64_t> job_from_path(const std::string& path) {
  static constexpr std::string_view kPrefix = "/v1/jobs/";
  static constexpr std::string_view kSuffix = "/events";
  if (path.size() <= kPrefix.size() + kSuffix.size() ||
      path.compare(0, kPrefix.size(), kPrefix) != 0 ||
      path.compare(path.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
    return std::nullopt;
  }
  const auto id = parse_uint(
      std::string_view(path).substr(kPrefix.size(), path.size() - kPrefix.size() - kSuffix.size()));
  if (!id || *id == 0) return std::nullopt;
  return id;
}

UniqueFd listen_tcp(const std::string& address, int port, int& bound_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port_s = std::to_string(port);
  const int rc = ::getaddrinfo(address.c_str(), port_s.c_str(), &hints, &res);
  if (rc != 0) throw std::runtime_error("HttpAddress " + address + ": " + ::gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(res, &::freeaddrinfo);
  UniqueFd fd(::socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) throw_errno("socket", errno);
  const int one = 1;
  (void)::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), res->ai_addr, res->ai_addrlen) != 0) {
    throw_errno("bind " + address + ":" + port_s, errno);
  }
  if (::listen(fd.get(), 1024) != 0) throw_errno("listen", errno);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
  bound_port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                        : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return fd;
}

}  // namespace

HttpApi::HttpApi(const AgentConfig& cfg, EventLoop& loop, NodeState& node,
                 const CallerPolicy& callers, Hooks hooks)
    : cfg_(cfg), loop_(loop), node_(node), callers_(callers), hooks_(std::move(hooks)) {}

void HttpApi::open() {
  StreamServer::Options options;
  options.name = "http";
  // No reservation: nobody is known to be privileged before the request is read; displacement
  // (below) stands in for it.
  options.shares = {cfg_.http_max_connections, 0, cfg_.http_max_connections_per_address};
  options.per_peer_reason = "per-address";
  options.request_timeout_ms = cfg_.http_timeout_ms;
  options.idle_timeout = false;
  options.write_timeout_ms = cfg_.http_write_timeout_ms;
  // Who a client is shows only in its request (a munge credential), so a connection that has not
  // sent one yet gives way to a newer one: idle connections from an address cannot keep out a
  // peer agent at that address, whose request comes with its connect (docs/security.md).
  options.displace_waiting = true;
  // A LAN's bandwidth-delay product, doubled by the kernel: a peer's evidence still flows at line
  // rate, and 128 unread answers cannot pin 4 MiB of kernel memory each.
  options.send_buffer = 64 * 1024;
  StreamServer::Policy policy;
  policy.refusal = [this](const StreamServer::Conn& c, const std::string& reason) {
    if (reason == "displaced")
      return busy_response("no request came on this connection and a newer one needed its slot");
    const std::string why = reason == "per-address"
                                ? "too many connections from " + c.address + " (at most " +
                                      std::to_string(cfg_.http_max_connections_per_address) +
                                      " at once)"
                                : "the agent serves as many connections as it can (" +
                                      std::to_string(cfg_.http_max_connections) + ")";
    return busy_response(why);
  };
  policy.on_close = [this](StreamServer::Conn& c) {
    if (c.tag == kScrapeTag && scrapes_in_flight_ > 0) --scrapes_in_flight_;
  };
  server_ = std::make_unique<StreamServer>(
      loop_, options,
      [this](StreamServer::Conn& c) {
        on_input(c);
        return false;
      },
      std::move(policy));
  server_->serve(listen_tcp(cfg_.http_address, cfg_.http_port, port_));
}

void HttpApi::stop() {
  if (server_) server_->stop();
}

void HttpApi::on_input(StreamServer::Conn& c) {
  HttpRequest req;
  const HttpParseResult p = parse_http_request(c.in, cfg_.http_max_header_bytes, req);
  if (p.state == HttpParse::kIncomplete) return;
  std::string response;
  if (p.state == HttpParse::kError) {
    ++stats_.requests[p.status];
    response = error_response(p.status, p.message);
  } else if (req.path == "/metrics" && req.method == "GET" &&
             scrapes_in_flight_ >= cfg_.http_max_scrapes) {
    // Scrapes are cheap to repeat and unauthenticated: a few at once, the rest come back later.
    ++stats_.requests[503];
    ++stats_.scrapes_refused;
    response = busy_response("too many /metrics requests at once (at most " +
                             std::to_string(cfg_.http_max_scrapes) + ")");
  } else {
    if (req.path == "/metrics" && req.method == "GET") {
      c.tag = kScrapeTag;
      ++scrapes_in_flight_;
    }
    response = handle(req);
  }
  c.in.clear();
  c.ignore_input = true;
  c.close_after_flush = true;
  server_->send(c, response);
}

std::string HttpApi::handle(const HttpRequest& req) {
  auto answer = [&](int status, const std::string& text) {
    ++stats_.requests[status];
    return text;
  };
  const bool history = req.path == "/v1/history";
  // POST only hands an outcome record over (inside the credential, no body).
  if (req.method != "GET" && !(req.method == "POST" && history)) {
    return answer(405, http_response(405, "application/json",
                                     json_body({{"error",
                                                 "only GET (and POST /v1/history) is "
                                                 "supported"}}),
                                     history ? "Allow: GET, POST\r\n" : "Allow: GET\r\n"));
  }
  if (req.path == "/metrics") {
    return answer(200,
                  http_response(200, "text/plain; version=0.0.4; charset=utf-8", hooks_.metrics()));
  }
  const std::optional<uint64_t> job_id = job_from_path(req.path);
  if (req.path != "/v1/health" && !history && !job_id)
    return answer(404, error_response(404, "no such endpoint"));

  // Munge: the credential must decode, carry this exact request target, and come from someone
  // entitled to the answer.
  auto auth = req.headers.find("authorization");
  static constexpr std::string_view kScheme = "Munge ";
  if (auth == req.headers.end() || auth->second.compare(0, kScheme.size(), kScheme) != 0) {
    return answer(401, http_response(401, "application/json",
                                     json_body({{"error", "a munge credential is required"}}),
                                     "WWW-Authenticate: Munge\r\n"));
  }
  const MungeDecoded cred = munge_verify(cfg_.munge_socket, auth->second.substr(kScheme.size()));
  if (!cred.ok) {
    spdlog::warn("http: refused a credential: {}", log_text(cred.error));
    return answer(401, error_response(401, cred.error));
  }
  if (req.method == "POST") {
    // The credential carries "<target>\n<record>": munge vouches for the record and its sender.
    if (cred.payload.compare(0, req.target.size() + 1, req.target + "\n") != 0) {
      return answer(401, error_response(401, "the credential was issued for another request"));
    }
    return history_post(cred.uid, cred.payload.substr(req.target.size() + 1));
  }
  if (cred.payload != req.target) {
    return answer(401, error_response(401, "the credential was issued for another request"));
  }
  if (history) {
    const auto q = parse_query(req.query);
    const int64_t since = q.count("since") != 0 ? parse_int(q.at("since")).value_or(0) : 0;
    return answer(200, http_response(200, "application/json", hooks_.history(since) + "\n"));
  }
  if (!job_id)
    return answer(200, http_response(200, "application/json", json_body(hooks_.health())));
  return job_events(*job_id, cred.uid, req.query);
}

std::string HttpApi::history_post(uid_t uid, const std::string& carried) {
  // Only another node's agent (root) or Slurm may write into this node's history.
  if (!callers_.privileged(uid)) {
    ++stats_.requests[403];
    return error_response(403, "uid " + std::to_string(uid) + " may not record job outcomes");
  }
  OutcomeRecord record;
  try {
    record = outcome_from_json(nlohmann::json::parse(carried));
  } catch (const std::exception& e) {
    ++stats_.requests[400];
    return error_response(400, std::string("not an outcome record: ") + e.what());
  }
  const bool durable = hooks_.record_outcome(record);
  ++stats_.requests[200];
  return http_response(200, "application/json",
                       json_body({{"recorded", record.job_id}, {"durable", durable}}));
}

std::string HttpApi::job_events(uint64_t job_id, uid_t uid, const std::string& query) {
  const JobRecord* j = node_.job(job_id);
  if (!callers_.privileged(uid) && (j == nullptr || !j->uid || *j->uid != uid)) {
    ++stats_.requests[403];
    return error_response(
        403, "uid " + std::to_string(uid) + " may not read job " + std::to_string(job_id));
  }
  const auto q = parse_query(query);
  AttributionWindow asked;
  asked.start_usec = q.count("start") != 0 ? parse_int(q.at("start")).value_or(0) * 1000000 : 0;
  asked.end_usec = q.count("end") != 0 ? parse_int(q.at("end")).value_or(0) * 1000000 : 0;
  NodeEvidence n;
  if (j != nullptr) {
    // A peer (root) or Slurm asks with slurmctld's times for the job, which may reach before what
    // this node saw; the owner gets no more than the job's own span here: node-wide kernel lines
    // name other users' processes, which dmesg_restrict keeps from them.
    const AttributionWindow w =
        callers_.privileged(uid)
            ? asked
            : owner_window(*j, asked, cfg_.evidence_settle_ms * 1000, now_usec());
    n = hooks_.evidence(*j, w.start_usec, w.end_usec);
  } else {
    // The node never heard of the job (its plugin messages were lost): node-wide events in the
    // window the leader gives are still this node's evidence. Only root and SlurmUser get here:
    // a job with no record has no owner to match, and its window no span to keep it in.
    JobRecord unknown;
    unknown.job_id = job_id;
    n = hooks_.evidence(unknown, asked.start_usec, asked.end_usec);
  }
  ++stats_.requests[200];
  return http_response(200, "application/json", json_body(n));
}

}  // namespace triage::agent
