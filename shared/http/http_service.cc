#include "shared/http/http_service.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "shared/http/http_wire.h"

namespace flotilla::http {
namespace {

inline constexpr int kListenBacklog = 512;

const char* ErrorType(int status) {
  if (status == 401) return "authentication_error";
  if (status == 403) return "permission_error";
  if (status == 404) return "not_found_error";
  if (status == 408 || status == 504) return "timeout_error";
  if (status == 429) return "rate_limit_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

// A listening socket on host:port; -1 and *error when there is none.
int Listen(const std::string& host, int port, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(),
                                   service.c_str(), &hints, &found);
      rc != 0) {
    *error = ::gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    // SO_REUSEADDR only: a second server on a port in use must fail.
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 ||
        ::listen(fd, kListenBacklog) != 0) {
      *error = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

}  // namespace

std::string HttpRequest::Header(absl::string_view name) const {
  const auto it = headers.find(absl::AsciiStrToLower(name));
  return it == headers.end() ? "" : it->second;
}

std::string JsonErrorBody(int status, const std::string& message) {
  return nlohmann::json{{"error",
                         {{"message", message},
                          {"type", ErrorType(status)},
                          {"param", nullptr},
                          {"code", nullptr}}}}
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

HttpService::HttpService(HttpServiceOptions options)
    : options_(std::move(options)) {
  if (!options_.error_body) options_.error_body = JsonErrorBody;
}

HttpService::~HttpService() { Stop(); }

void HttpService::Route(const std::string& method, const std::string& path,
                        Handler handler, bool any_origin) {
  RouteEntry e;
  e.any_origin = any_origin;
  e.method = method;
  e.prefix = absl::EndsWith(path, "*");
  e.path = e.prefix ? path.substr(0, path.size() - 1) : path;
  e.handler = std::move(handler);
  routes_.push_back(std::move(e));
}

std::string HttpService::ErrorBody(int status,
                                   const std::string& message) const {
  return options_.error_body(status, message);
}

bool HttpService::OriginAllowed(const HttpRequest& req,
                                const std::string& origin) const {
  if (options_.cors_origin == "*" || origin == options_.cors_origin) {
    return true;
  }
  // The server's own pages: the origin the browser loaded them from is the
  // Host it sends.
  const std::string host = absl::AsciiStrToLower(req.Header("Host"));
  const std::string lower = absl::AsciiStrToLower(origin);
  return !host.empty() &&
         (lower == "http://" + host || lower == "https://" + host);
}

void HttpService::Dispatch(const HttpRequest& req, HttpResponse* res) const {
  const std::string origin = req.Header("Origin");
  if (!origin.empty() && !OriginAllowed(req, origin)) {
    bool page = false;
    for (const RouteEntry& r : routes_) {
      page |=
          r.any_origin && r.method == req.method &&
          (r.prefix ? absl::StartsWith(req.path, r.path) : req.path == r.path);
    }
    if (!page) {
      res->Set(
          403, "application/json",
          ErrorBody(403, absl::StrCat("requests from the web page at origin '",
                                      origin.substr(0, 200),
                                      "' are refused (allow one with "
                                      "--cors-origin)")));
      return;
    }
  }
  if (req.method == "OPTIONS" && !options_.cors_origin.empty()) {
    res->status = 204;
    res->SetHeader("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    res->SetHeader("Access-Control-Allow-Headers",
                   "Authorization, Content-Type");
    res->SetHeader("Access-Control-Max-Age", "600");
    return;
  }
  std::vector<std::string> allowed;
  for (const RouteEntry& r : routes_) {
    const bool match =
        r.prefix ? absl::StartsWith(req.path, r.path) : req.path == r.path;
    if (!match) continue;
    if (r.method == req.method) return r.handler(req, res);
    allowed.push_back(r.method);
  }
  if (!allowed.empty()) {
    res->SetHeader("Allow", absl::StrJoin(allowed, ", "));
    res->Set(405, "application/json",
             ErrorBody(405, absl::StrCat(req.method, " is not allowed on ",
                                         req.path, " (allowed: ",
                                         absl::StrJoin(allowed, ", "), ")")));
    return;
  }
  if (not_found_) return not_found_(req, res);
  res->Set(404, "application/json",
           ErrorBody(404, absl::StrCat("no route ", req.path)));
}

void HttpService::Log(const HttpRequest& req, const HttpResponse& res) const {
  if (logger_) logger_(req, res);
}

absl::Status HttpService::Start() {
  std::string error;
  listen_fd_ = Listen(options_.host, options_.port, &error);
  if (listen_fd_ < 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", options_.host, ":", options_.port, " (", error,
        ": in use, or not an address of this machine)"));
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.ss_family == AF_INET6
                    ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                    : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError(
        absl::StrCat("pipe2 failed: ", std::strerror(errno)));
  }
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  return absl::OkStatus();
}

void HttpService::AcceptLoop() {
  while (!stopping_) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR) return;
    if (stopping_ || (p[1].revents & POLLIN)) return;
    if (!(p[0].revents & POLLIN)) continue;
    const int fd =
        ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    int yes = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
    if (open_.load() >= options_.max_connections) {
      // Told, not left hanging: the answer fits a fresh socket's buffer.
      HttpResponse busy;
      busy.Set(503, "application/json",
               ErrorBody(503, absl::StrCat("the server has its ",
                                           options_.max_connections,
                                           " connections open; retry")));
      busy.SetHeader("Retry-After", "1");
      SendResponse(fd, busy, /*keep_alive=*/false, options_, nullptr);
      ::close(fd);
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      fds_.insert(fd);
      ++open_;
    }
    std::thread([this, fd] {
      Serve(fd);
      std::lock_guard<std::mutex> lock(mu_);
      fds_.erase(fd);
      ::close(fd);
      --open_;
      all_closed_.notify_all();
    }).detach();
  }
}

void HttpService::Stop() {
  if (listen_fd_ < 0) return;
  stopping_ = true;
  if (wake_[1] >= 0) (void)!::write(wake_[1], "x", 1);
  if (accept_thread_.joinable()) accept_thread_.join();
  ::close(listen_fd_);
  listen_fd_ = -1;
  std::unique_lock<std::mutex> lock(mu_);
  // Wakes connections waiting for bytes; one in a handler ends with it.
  for (int fd : fds_) ::shutdown(fd, SHUT_RD);
  all_closed_.wait(lock, [this] { return open_.load() == 0; });
  for (int& fd : wake_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

}  // namespace flotilla::http
