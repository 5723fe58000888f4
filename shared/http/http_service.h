// The HTTP/1.1 server behind every Flotilla endpoint (the OpenAI API and
// the chat page, /metrics). Requests are parsed by Boost.Beast's parser
// (Debian's libboost-dev) over plain blocking sockets, one thread per
// connection, so a handler may block (a completion waits for its tokens).
//
// It replaces Debian's cpp-httplib 0.11, whose compiled-in behaviour could
// not be changed from outside: it decoded gzip and chunked bodies in full
// before its size cap, answered Range on every route, dropped pipelined
// requests, refused form-encoded bodies over 8 KiB with an empty 413 and
// let a byte-a-second client hold a thread forever. Here:
//   - one body cap for every transfer encoding (decoded bytes, counted as
//     they arrive); Content-Encoding other than identity is refused (415);
//   - no Range handling: every response is whole;
//   - pipelined requests are answered in order;
//   - strict parsing: conflicting Content-Length, malformed lines and
//     header bytes, HTTP/1.1 without Host are refused (400);
//   - a deadline for a request's headers and one for its body (408), an
//     idle limit between requests, a send deadline for a client that does
//     not read, and a connection cap (503 past it);
//   - every error this layer answers is a JSON body (`error_body`).
#ifndef FLOTILLA_SHARED_HTTP_HTTP_SERVICE_H_
#define FLOTILLA_SHARED_HTTP_HTTP_SERVICE_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace flotilla::http {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: path and query
  std::string path;    // without the query
  std::string body;    // decoded (chunked transfer coding removed)
  // Header names lower-cased; a repeated header's values joined by ", ".
  std::map<std::string, std::string> headers;

  // The value of header `name` (any case), or "".
  std::string Header(absl::string_view name) const;
};

// A streamed body: called until it returns false; each call appends what
// is ready to *out (blocking until something is, or the end). Returning
// false means *out holds the last piece.
using StreamFn = std::function<bool(std::string* out)>;
// After a stream: whether every piece reached the client.
using StreamEnd = std::function<void(bool completed)>;

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  StreamFn stream;  // set: a chunked body from it instead of `body`
  StreamEnd stream_end;
  // Filled by the server after writing: false when the client went away
  // before the whole response (a stream cut short).
  bool completed = true;

  void Set(int code, std::string type, std::string content) {
    status = code;
    content_type = std::move(type);
    body = std::move(content);
  }
  void SetHeader(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
  }
};

using Handler = std::function<void(const HttpRequest&, HttpResponse*)>;

struct HttpServiceOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port
  size_t max_body_bytes = 1 << 20;
  size_t max_header_bytes = 16 << 10;  // request line and headers
  // From a connection's first byte (or the end of its previous request) to
  // the end of a request's headers, then to the end of its body.
  absl::Duration header_timeout = absl::Seconds(10);
  absl::Duration body_timeout = absl::Seconds(30);
  // How long a kept-alive connection may wait for its next request.
  absl::Duration idle_timeout = absl::Seconds(60);
  // How long one send may wait for a client that does not read.
  absl::Duration send_timeout = absl::Seconds(30);
  // Open connections at most; past it a new one is answered 503 and
  // closed. Each holds a thread.
  int max_connections = 512;
  // Set: CORS for this origin ("*" for any): the header on every response
  // and an answer to OPTIONS preflights; requests from other origins than
  // this one and the server's own are refused (Route).
  std::string cors_origin;
  // The body of an error this layer answers (400, 404, 405, 408, 413, 415,
  // 431, 503): JSON by default ({"error": {"message", "type", ...}}).
  std::function<std::string(int status, const std::string& message)> error_body;
};

class HttpService {
 public:
  explicit HttpService(HttpServiceOptions options);
  ~HttpService();
  HttpService(const HttpService&) = delete;
  HttpService& operator=(const HttpService&) = delete;

  // Before Start. `path` exact, or a prefix when it ends in '*'. A request
  // that carries an Origin header other than the server's own (its Host) or
  // the allowed cors_origin is answered 403 before any handler runs: a web
  // page the user visits could otherwise drive a local server with a
  // "simple" cross-origin POST, which needs no preflight. Requests without
  // Origin (curl, SDKs) are not affected. `any_origin` exempts a route
  // that only serves a page.
  void Route(const std::string& method, const std::string& path,
             Handler handler, bool any_origin = false);
  // Answers what no route matched (default: JSON 404, or 405 naming the
  // methods when only the method is wrong).
  void SetNotFound(Handler handler) { not_found_ = std::move(handler); }
  // After every response is written (status, whether it completed).
  void SetLogger(
      std::function<void(const HttpRequest&, const HttpResponse&)> logger) {
    logger_ = std::move(logger);
  }

  // Binds and accepts on a background thread; Unavailable naming the
  // address when it cannot listen.
  absl::Status Start();
  int port() const { return port_; }
  int open_connections() const { return open_.load(); }
  // Stops accepting, wakes every connection and waits for them to end.
  void Stop();

  // What the connection threads call (connection.cc).
  void Dispatch(const HttpRequest& request, HttpResponse* response) const;
  void Log(const HttpRequest& request, const HttpResponse& response) const;
  std::string ErrorBody(int status, const std::string& message) const;
  const HttpServiceOptions& options() const { return options_; }
  bool stopping() const { return stopping_.load(); }

 private:
  struct RouteEntry {
    std::string method;
    std::string path;
    bool prefix = false;
    bool any_origin = false;
    Handler handler;
  };
  // Whether a request with this Origin header may reach the API.
  bool OriginAllowed(const HttpRequest& req, const std::string& origin) const;
  void AcceptLoop();
  void Serve(int fd);

  HttpServiceOptions options_;
  std::vector<RouteEntry> routes_;
  Handler not_found_;
  std::function<void(const HttpRequest&, const HttpResponse&)> logger_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // a pipe that ends the accept loop's poll
  int port_ = 0;
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> open_{0};
  std::mutex mu_;
  std::condition_variable all_closed_;
  std::set<int> fds_;  // open connections, guarded by mu_
};

// The default error body: {"error": {"message", "type", "param", "code"}}.
std::string JsonErrorBody(int status, const std::string& message);

}  // namespace flotilla::http

#endif  // FLOTILLA_SHARED_HTTP_HTTP_SERVICE_H_
