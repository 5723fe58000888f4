#include "shared/http/listen.h"

#include <httplib.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>

#include "absl/strings/str_cat.h"

namespace flotilla::http {

absl::StatusOr<int> StartListening(httplib::Server* server,
                                   const std::string& host, int port,
                                   std::thread* thread) {
  // Remember the socket as httplib makes it, to listen on it again with
  // room for a burst after its listen(5).
  int listen_fd = -1;
  server->set_socket_options([&listen_fd](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_fd = sock;
  });
  const int bound = port == 0 ? server->bind_to_any_port(host)
                              : (server->bind_to_port(host, port) ? port : -1);
  if (bound < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", host, ":", port,
                     " (in use, or not an address of this machine)"));
  }
  if (listen_fd >= 0 && ::listen(listen_fd, kListenBacklog) != 0) {
    return absl::InternalError(
        absl::StrCat("listen(", kListenBacklog, ") failed: errno ", errno));
  }
  *thread = std::thread([server] { server->listen_after_bind(); });
  while (!server->is_running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return bound;
}

}  // namespace flotilla::http
