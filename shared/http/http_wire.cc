#include "shared/http/http_wire.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace flotilla::http {
namespace {

// Polls `fd` for `events` until `deadline`, in slices of at most 250 ms so
// that a stopping service is seen.
bool WaitFor(int fd, short events, absl::Time deadline,
             const HttpService* service) {
  for (;;) {
    if (service != nullptr && service->stopping()) return false;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    const int ms = static_cast<int>(
        std::min<int64_t>(250, absl::ToInt64Milliseconds(left) + 1));
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, ms);
    if (n > 0) return true;  // ready, or an error/hang-up the I/O will see
    if (n < 0 && errno != EINTR) return false;
  }
}

}  // namespace

const char* ReasonPhrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 204:
      return "No Content";
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
    case 415:
      return "Unsupported Media Type";
    case 417:
      return "Expectation Failed";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Status";
  }
}

bool WaitReadable(int fd, absl::Time deadline, const HttpService* service) {
  return WaitFor(fd, POLLIN, deadline, service);
}

bool SendAll(int fd, absl::string_view data, absl::Time deadline,
             const HttpService* service) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      // A stopping service still lets a response finish its send.
      if (!WaitFor(fd, POLLOUT, deadline, nullptr)) return false;
      continue;
    }
    return false;
  }
  return true;
}

bool SendResponse(int fd, const HttpResponse& r, bool keep_alive,
                  const HttpServiceOptions& options,
                  const HttpService* service) {
  const bool streamed = static_cast<bool>(r.stream);
  std::string head =
      absl::StrCat("HTTP/1.1 ", r.status, " ", ReasonPhrase(r.status), "\r\n");
  if (r.status != 204) {
    absl::StrAppend(&head, "Content-Type: ", r.content_type, "\r\n");
  }
  for (const auto& [name, value] : r.headers) {
    absl::StrAppend(&head, name, ": ", value, "\r\n");
  }
  if (!options.cors_origin.empty()) {
    absl::StrAppend(&head, "Access-Control-Allow-Origin: ", options.cors_origin,
                    "\r\n");
    if (options.cors_origin != "*") absl::StrAppend(&head, "Vary: Origin\r\n");
  }
  if (streamed) {
    absl::StrAppend(&head, "Transfer-Encoding: chunked\r\n",
                    "Cache-Control: no-cache\r\n");
  } else if (r.status != 204) {
    absl::StrAppend(&head, "Content-Length: ", r.body.size(), "\r\n");
  }
  absl::StrAppend(&head, "Connection: ", keep_alive ? "keep-alive" : "close",
                  "\r\n\r\n");
  const auto deadline = [&] { return absl::Now() + options.send_timeout; };
  if (!streamed) {
    head += r.body;
    return SendAll(fd, head, deadline(), service);
  }
  bool ok = SendAll(fd, head, deadline(), service);
  for (bool more = ok; more;) {
    std::string piece;
    more = r.stream(&piece);
    if (!piece.empty()) {
      const std::string chunk =
          absl::StrCat(absl::Hex(piece.size()), "\r\n", piece, "\r\n");
      ok = SendAll(fd, chunk, deadline(), service);
      if (!ok) break;
    }
  }
  if (ok) ok = SendAll(fd, "0\r\n\r\n", deadline(), service);
  if (r.stream_end) r.stream_end(ok);
  return ok;
}

}  // namespace flotilla::http
