#include "shared/metrics/metrics_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "prometheus/gauge.h"
#include "prometheus/text_serializer.h"

namespace flotilla::metrics {

std::string Scrape(const prometheus::Registry& registry) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry.Collect());
  return out.str();
}

void AddBuildInfo(prometheus::Registry& registry,
                  const std::string& component) {
  prometheus::BuildGauge()
      .Name("flotilla_build_info")
      .Help(
          "Always 1; the labels say which Flotilla binary and version this is")
      .Register(registry)
      .Add({{"component", component}, {"version", FLOTILLA_VERSION}})
      .Set(1);
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& host, int port,
    std::shared_ptr<prometheus::Registry> registry) {
  auto s = std::unique_ptr<MetricsServer>(new MetricsServer());
  s->registry_ = std::move(registry);
  s->server_ = std::make_unique<httplib::Server>();
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, which let a
  // second server share a port already in use instead of failing.
  s->server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  prometheus::Registry* r = s->registry_.get();
  s->server_->Get(
      "/metrics", [r](const httplib::Request&, httplib::Response& res) {
        res.set_content(Scrape(*r), "text/plain; version=0.0.4; charset=utf-8");
      });
  s->port_ = port == 0 ? s->server_->bind_to_any_port(host)
                       : (s->server_->bind_to_port(host, port) ? port : -1);
  if (s->port_ < 0) {
    return absl::UnavailableError(
        absl::StrCat("metrics: cannot listen on ", host, ":", port,
                     " (in use, or not an address of this machine)"));
  }
  httplib::Server* server = s->server_.get();
  s->thread_ = std::thread([server] { server->listen_after_bind(); });
  // httplib's stop() does nothing until the loop runs; wait for it so a
  // server stopped right away (a test, a failed start) does not hang.
  while (!server->is_running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return s;
}

MetricsServer::~MetricsServer() {
  if (server_ != nullptr) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace flotilla::metrics
