// Starting a cpp-httplib server the way every Flotilla HTTP endpoint (the
// OpenAI API, /metrics) needs it. Debian's libcpp-httplib 0.11 listens with
// a backlog of 5 (a burst of 16 clients had connections reset) and sets
// SO_REUSEPORT (a second server shared a port already in use instead of
// failing), and its stop() does nothing until the accept loop runs (a stop
// right after a start hung).
#ifndef FLOTILLA_SHARED_HTTP_LISTEN_H_
#define FLOTILLA_SHARED_HTTP_LISTEN_H_

#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace flotilla::http {

inline constexpr int kListenBacklog = 512;

// Binds `server` to host:port (0: any free port) with SO_REUSEADDR only and
// a backlog of kListenBacklog, runs its accept loop on *thread, and returns
// the bound port once the loop runs (so server->stop() then always ends
// it). Unavailable, naming the address, when it cannot listen.
absl::StatusOr<int> StartListening(httplib::Server* server,
                                   const std::string& host, int port,
                                   std::thread* thread);

}  // namespace flotilla::http

#endif  // FLOTILLA_SHARED_HTTP_LISTEN_H_
