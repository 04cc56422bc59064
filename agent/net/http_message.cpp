#include "agent/net/http_message.h"

#include "common/percent_decode.h"
#include "common/text.h"

namespace triage::agent {

namespace {

const char* reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

HttpParseResult error(int status, std::string message) {
  HttpParseResult r;
  r.state = HttpParse::kError;
  r.status = status;
  r.message = std::move(message);
  return r;
}

}  // namespace

HttpParseResult parse_http_request(std::string_view buffer, size_t max_head, HttpRequest& out) {
  size_t end = buffer.find("\r\n\r\n");
  size_t sep = 4;
  if (end == std::string_view::npos) {
    end = buffer.find("\n\n");
    sep = 2;
  }
  if (end == std::string_view::npos) {
    if (buffer.size() > max_head) return error(431, "request head too large");
    return {};
  }
  if (end + sep > max_head) return error(431, "request head too large");
  const std::string_view head = buffer.substr(0, end);
  bool first = true;
  out = HttpRequest{};
  for (std::string_view line : split(head, '\n')) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (first) {
      first = false;
      const auto parts = split(line, ' ');
      if (parts.size() != 3 || parts[0].empty() || parts[1].empty()) {
        return error(400, "malformed request line");
      }
      if (parts[2] != "HTTP/1.1" && parts[2] != "HTTP/1.0")
        return error(400, "unsupported HTTP version");
      out.method = std::string(parts[0]);
      out.target = std::string(parts[1]);
      if (out.target.front() != '/') return error(400, "request target must be a path");
      const size_t q = out.target.find('?');
      out.path = out.target.substr(0, q);
      if (q != std::string::npos) out.query = out.target.substr(q + 1);
      continue;
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return error(400, "malformed header line");
    out.headers[to_lower(trim(line.substr(0, colon)))] = std::string(trim(line.substr(colon + 1)));
  }
  if (first) return error(400, "empty request");
  if (out.headers.count("transfer-encoding") != 0)
    return error(501, "request bodies are not supported");
  if (auto it = out.headers.find("content-length"); it != out.headers.end()) {
    const auto n = parse_uint(it->second);
    if (!n) return error(400, "bad Content-Length");
    if (*n > 0) return error(413, "request bodies are not accepted");
  }
  HttpParseResult r;
  r.state = HttpParse::kOk;
  r.consumed = end + sep;
  return r;
}

std::string http_response(int status, std::string_view content_type, std::string_view body,
                          std::string_view extra_headers) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
  out += "Content-Type: ";
  out += content_type;
  out += "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  out += "Connection: close\r\nCache-Control: no-store\r\n";
  out += extra_headers;
  out += "\r\n";
  out += body;
  return out;
}

std::map<std::string, std::string> parse_query(std::string_view query) {
  std::map<std::string, std::string> out;
  for (std::string_view part : split(query, '&')) {
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    const std::string k = percent_decode(part.substr(0, eq), true);
    out[k] = eq == std::string_view::npos ? "" : percent_decode(part.substr(eq + 1), true);
  }
  return out;
}

}  // namespace triage::agent
