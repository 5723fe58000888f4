#include "expert-worker/server.h"

#include <grpcpp/health_check_service_interface.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "expert-worker/expert_service.h"
#include "expert-worker/worker_metrics.h"
#include "shared/metrics/metrics_server.h"
#include "shared/transport/transport.h"

namespace flotilla::expert_worker {
namespace {

// How long in-flight calls may take to finish after a shutdown signal
// before they are cancelled. Compute calls are one layer of one step, so
// well under this on any sane disk.
constexpr std::chrono::seconds kDrainTimeout{5};

}  // namespace

absl::Status BlockShutdownSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  if (int err = pthread_sigmask(SIG_BLOCK, &signals, nullptr); err != 0) {
    return absl::InternalError(
        absl::StrCat("pthread_sigmask: ", std::strerror(err)));
  }
  return absl::OkStatus();
}

absl::Status ServeUntilSignal(ExpertCompute* compute,
                              const ServeOptions& options) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);

  transport::KeepFreedMessageMemory();
  transport::DisableMutexDeadlockDetection();
  auto registry = std::make_shared<prometheus::Registry>();
  metrics::AddBuildInfo(*registry, "expert-worker");
  WorkerMetrics worker_metrics(*registry);
  worker_metrics.MemoryBudget(compute->accountant().budget());
  std::unique_ptr<metrics::MetricsServer> metrics_server;
  if (options.metrics_port >= 0) {
    absl::StatusOr<std::unique_ptr<metrics::MetricsServer>> started =
        metrics::MetricsServer::Start(options.host, options.metrics_port,
                                      registry);
    if (!started.ok()) return started.status();
    metrics_server = *std::move(started);
    std::printf("flotilla-expert-worker: metrics on http://%s:%d/metrics\n",
                options.host.c_str(), metrics_server->port());
  }
  ExpertServiceImpl service(
      compute, metrics_server != nullptr ? &worker_metrics : nullptr);
  transport::ServerOptions server_options;
  server_options.host = options.host;
  server_options.port = options.port;
  server_options.tls = options.tls;
  server_options.max_message_bytes = kMaxMessageBytes;
  server_options.services = {&service};
  int bound_port = 0;
  absl::StatusOr<std::unique_ptr<grpc::Server>> server =
      transport::StartServer(server_options, &bound_port);
  if (!server.ok()) return server.status();
  std::printf("flotilla-expert-worker: listening on %s:%d (%s)\n",
              options.host.c_str(), bound_port,
              options.tls.enabled()
                  ? (options.tls.ca.empty() ? "TLS" : "mutual TLS")
                  : "no TLS: plaintext");
  std::fflush(stdout);
  if (!options.tls.enabled() && options.host != "127.0.0.1" &&
      options.host != "localhost" && options.host != "::1") {
    std::fprintf(stderr,
                 "flotilla-expert-worker: warning: serving %s without TLS: "
                 "anyone who reaches this address can send expert calls "
                 "(--tls-cert/--tls-key/--tls-ca)\n",
                 options.host.c_str());
  }

  int signal_number = 0;
  while (sigwait(&signals, &signal_number) != 0) {
  }
  std::fprintf(stderr, "flotilla-expert-worker: %s received, shutting down\n",
               signal_number == SIGINT ? "SIGINT" : "SIGTERM");
  // Health first, so probes stop routing to us while calls drain.
  if (grpc::HealthCheckServiceInterface* health =
          (*server)->GetHealthCheckService()) {
    health->Shutdown();
  }
  (*server)->Shutdown(std::chrono::system_clock::now() + kDrainTimeout);
  service.StopCompute();
  (*server)->Wait();
  std::fprintf(stderr, "flotilla-expert-worker: experts: %s\n",
               compute->StatsLine().c_str());
  return absl::OkStatus();
}

}  // namespace flotilla::expert_worker
