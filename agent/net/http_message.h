// The little HTTP/1.1 the agent speaks: request heads (no bodies: every endpoint is a GET) and
// complete responses with Connection: close.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

namespace triage::agent {

struct HttpRequest {
  std::string method;
  std::string target;  // as sent: path and query
  std::string path;
  std::string query;
  std::map<std::string, std::string> headers;  // lower-case names
};

enum class HttpParse { kIncomplete, kOk, kError };

struct HttpParseResult {
  HttpParse state = HttpParse::kIncomplete;
  int status = 0;  // for kError: the status to answer with
  std::string message;
  size_t consumed = 0;
};

// Parses a request head from `buffer`. Heads longer than `max_head` are an error (431); a request
// that announces a body is refused (413), as are chunked bodies (501).
HttpParseResult parse_http_request(std::string_view buffer, size_t max_head, HttpRequest& out);

std::string http_response(int status, std::string_view content_type, std::string_view body,
                          std::string_view extra_headers = "");

// "a=1&b=x%20y" -> {a: 1, b: "x y"}.
std::map<std::string, std::string> parse_query(std::string_view query);

}  // namespace triage::agent
