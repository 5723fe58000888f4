// One connection's thread: read a request (Beast's parser fed from a
// non-blocking socket under the header and body deadlines), answer it,
// and go on with the next one on the same connection (pipelined requests
// are already in `in`, in order) until the client closes, asks to, or an
// error leaves the stream in an unknown state.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cerrno>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "shared/http/http_service.h"
#include "shared/http/http_wire.h"

namespace flotilla::http {
namespace {

namespace bhttp = boost::beast::http;

enum class Read { kRequest, kClosed, kAnswered };

struct Connection {
  int fd;
  const HttpService& service;
  std::string in;  // received, not yet parsed
};

// An error this layer answers; the connection closes after it.
Read Refuse(Connection& c, int status, const std::string& message) {
  HttpResponse r;
  r.Set(status, "application/json", c.service.ErrorBody(status, message));
  SendResponse(c.fd, r, /*keep_alive=*/false, c.service.options(), &c.service);
  HttpRequest none;
  c.service.Log(none, r);
  return Read::kAnswered;
}

// What the parser's error means for the client.
Read RefuseParse(Connection& c, const boost::beast::error_code& ec) {
  const HttpServiceOptions& o = c.service.options();
  if (ec == bhttp::error::header_limit) {
    return Refuse(c, 431,
                  absl::StrCat("the request line and headers are over ",
                               o.max_header_bytes, " bytes"));
  }
  if (ec == bhttp::error::body_limit) {
    return Refuse(
        c, 413,
        absl::StrCat("the request body is over ", o.max_body_bytes, " bytes"));
  }
  if (ec == bhttp::error::bad_content_length) {
    return Refuse(c, 400, "conflicting or malformed Content-Length");
  }
  return Refuse(c, 400, absl::StrCat("malformed request: ", ec.message()));
}

absl::string_view View(boost::beast::string_view v) {
  return absl::string_view(v.data(), v.size());
}

// Checks made once the headers are in, before any body is read. An empty
// string: go on.
std::pair<int, std::string> CheckHeaders(
    const bhttp::request_parser<bhttp::string_body>& p) {
  const auto& m = p.get();
  if (m.version() >= 11 && m.find(bhttp::field::host) == m.end()) {
    return {400, "an HTTP/1.1 request needs a Host header"};
  }
  const auto enc = m.find(bhttp::field::content_encoding);
  if (enc != m.end() &&
      !absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(View(enc->value())),
                              "identity")) {
    return {415,
            absl::StrCat("Content-Encoding '", std::string(View(enc->value())),
                         "' is not accepted: send the body "
                         "uncompressed")};
  }
  const auto te = m.find(bhttp::field::transfer_encoding);
  if (te != m.end() &&
      !absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(View(te->value())),
                              "chunked")) {
    return {501,
            absl::StrCat("Transfer-Encoding '", std::string(View(te->value())),
                         "' is not supported (chunked only)")};
  }
  const auto expect = m.find(bhttp::field::expect);
  if (expect != m.end() &&
      !absl::EqualsIgnoreCase(View(expect->value()), "100-continue")) {
    return {417, absl::StrCat("Expect '", std::string(View(expect->value())),
                              "' is not supported")};
  }
  return {0, ""};
}

Read ReadRequest(Connection& c, bool first, HttpRequest* out,
                 bool* keep_alive) {
  const HttpServiceOptions& o = c.service.options();
  bhttp::request_parser<bhttp::string_body> p;
  p.header_limit(static_cast<std::uint32_t>(
      std::min<size_t>(o.max_header_bytes, UINT32_MAX)));
  p.body_limit(o.max_body_bytes);
  p.eager(true);
  // A new connection has header_timeout to send its request; a kept-alive
  // one idle_timeout to start the next, then header_timeout from its first
  // byte.
  bool started = !c.in.empty();
  absl::Time deadline =
      absl::Now() + (first || started ? o.header_timeout : o.idle_timeout);
  bool headers_checked = false;
  for (;;) {
    while (!c.in.empty() && !p.is_done()) {
      boost::beast::error_code ec;
      const size_t used =
          p.put(boost::asio::buffer(c.in.data(), c.in.size()), ec);
      c.in.erase(0, used);
      if (ec && ec != bhttp::error::need_more) return RefuseParse(c, ec);
      if (p.is_header_done() && !headers_checked) {
        headers_checked = true;
        const auto [status, why] = CheckHeaders(p);
        if (status != 0) return Refuse(c, status, why);
        deadline = absl::Now() + o.body_timeout;
        if (p.get().find(bhttp::field::expect) != p.get().end() &&
            !p.is_done() &&
            !SendAll(c.fd, "HTTP/1.1 100 Continue\r\n\r\n",
                     absl::Now() + o.send_timeout, &c.service)) {
          return Read::kClosed;
        }
      }
      if (ec == bhttp::error::need_more || used == 0) break;
    }
    if (p.is_done()) break;
    if (!WaitReadable(c.fd, deadline, &c.service)) {
      if (c.service.stopping() || !started) return Read::kClosed;
      return Refuse(c, 408,
                    headers_checked
                        ? absl::StrCat("the request body did not arrive "
                                       "within ",
                                       absl::FormatDuration(o.body_timeout))
                        : absl::StrCat("the request headers did not arrive "
                                       "within ",
                                       absl::FormatDuration(o.header_timeout)));
    }
    char buf[16384];
    const ssize_t n = ::recv(c.fd, buf, sizeof(buf), 0);
    if (n == 0) return Read::kClosed;  // the client closed (or half-closed)
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      return Read::kClosed;
    }
    if (!started) {
      started = true;
      deadline = absl::Now() + o.header_timeout;
    }
    c.in.append(buf, static_cast<size_t>(n));
  }
  auto& m = p.get();
  out->method = std::string(m.method_string());
  out->target = std::string(m.target());
  out->path = out->target.substr(0, out->target.find('?'));
  for (const auto& field : m) {
    std::string name = absl::AsciiStrToLower(absl::string_view(
        field.name_string().data(), field.name_string().size()));
    std::string& value = out->headers[name];
    if (!value.empty()) value += ", ";
    value.append(field.value().data(), field.value().size());
  }
  out->body = std::move(m.body());
  *keep_alive = p.keep_alive();
  return Read::kRequest;
}

}  // namespace

void HttpService::Serve(int fd) {
  Connection c{fd, *this, {}};
  for (bool first = true; !stopping(); first = false) {
    HttpRequest request;
    bool keep_alive = false;
    if (ReadRequest(c, first, &request, &keep_alive) != Read::kRequest) return;
    HttpResponse response;
    Dispatch(request, &response);
    keep_alive = keep_alive && !stopping();
    response.completed = SendResponse(fd, response, keep_alive, options_, this);
    Log(request, response);
    if (!response.completed || !keep_alive) return;
  }
}

}  // namespace flotilla::http
