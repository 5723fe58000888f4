#include "expert-worker/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "flotilla/v1/expert.grpc.pb.h"
#include "flotilla/v1/expert.pb.h"

namespace flotilla::expert_worker {
namespace {

// How long in-flight calls may take to finish after a shutdown signal
// before they are cancelled. Compute calls are one layer of one step, so
// well under this on any sane disk.
constexpr std::chrono::seconds kDrainTimeout{5};

v1::InfoResponse MakeInfo(const ShardPlan& plan) {
  v1::InfoResponse info;
  info.set_worker_version(kWorkerVersion);
  info.set_model_fingerprint(plan.model_fingerprint);
  info.set_shard_index(static_cast<uint32_t>(plan.shard.index));
  info.set_shard_count(static_cast<uint32_t>(plan.shard.count));
  for (const auto& [layer, experts] : plan.owned_experts) {
    v1::ExpertList& list =
        (*info.mutable_owned_experts())[static_cast<uint32_t>(layer)];
    list.mutable_experts()->Add(experts.begin(), experts.end());
  }
  info.set_num_layers(static_cast<uint32_t>(plan.num_layers));
  info.set_num_experts(static_cast<uint32_t>(plan.num_experts));
  info.set_row_width(static_cast<uint32_t>(plan.row_width));
  info.set_memory_budget_bytes(plan.memory_budget_bytes);
  info.set_compute_threads(static_cast<uint32_t>(plan.compute_threads));
  info.set_max_request_bytes(kMaxMessageBytes);
  return info;
}

// Every handler answers inline: none blocks (Info copies a prebuilt
// message), so the callback API's rule "reactors never block" holds. Once
// Compute does I/O it becomes a real reactor finishing from the read path.
// Thread-safe: the only state is immutable after construction.
class ExpertServiceImpl final : public v1::ExpertService::CallbackService {
 public:
  explicit ExpertServiceImpl(v1::InfoResponse info) : info_(std::move(info)) {}

  grpc::ServerUnaryReactor* Compute(grpc::CallbackServerContext* context,
                                    const v1::ComputeRequest* request,
                                    v1::ComputeResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    // Honest about the state of the project: the service and its contract
    // exist so coordinators can connect and check Info; the expert store and
    // executor are the subject of the expert-worker issue.
    reactor->Finish(grpc::Status(
        grpc::StatusCode::UNIMPLEMENTED,
        "Compute is not implemented yet: expert compute arrives with the "
        "expert-worker issue (this worker only answers Info and health)"));
    return reactor;
  }

  grpc::ServerUnaryReactor* Prefetch(grpc::CallbackServerContext* context,
                                     const v1::PrefetchRequest* request,
                                     v1::PrefetchResponse* response) override {
    // Prefetch is advisory by contract; a worker without a cache ignores it
    // and says so with experts_scheduled = 0 rather than failing the call.
    response->set_experts_scheduled(0);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* Info(grpc::CallbackServerContext* context,
                                 const v1::InfoRequest* request,
                                 v1::InfoResponse* response) override {
    *response = info_;
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  const v1::InfoResponse info_;
};

}  // namespace

absl::Status ServeUntilSignal(const ShardPlan& plan,
                              const ServeOptions& options) {
  // Block before gRPC creates its threads, so they inherit the mask and the
  // signals stay pending until sigwait below takes them. Doing the shutdown
  // in a signal handler is not an option: Shutdown() is not
  // async-signal-safe.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  if (int err = pthread_sigmask(SIG_BLOCK, &signals, nullptr); err != 0) {
    return absl::InternalError(
        absl::StrCat("pthread_sigmask: ", std::strerror(err)));
  }

  grpc::EnableDefaultHealthCheckService(true);
  // Keep this call: it is what makes the linker keep the reflection library
  // (Debian links with --as-needed), and it registers the service.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  ExpertServiceImpl service(MakeInfo(plan));
  grpc::ServerBuilder builder;
  const std::string address = absl::StrCat(
      options.host.find(':') != std::string::npos ? "[" : "", options.host,
      options.host.find(':') != std::string::npos ? "]" : "", ":",
      options.port);
  int bound_port = 0;
  // Plaintext for now; TLS belongs to shared/transport (DESIGN.md §3).
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(),
                           &bound_port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(kMaxMessageBytes));
  builder.SetMaxSendMessageSize(static_cast<int>(kMaxMessageBytes));
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", address,
                     " (address in use, bad host, or no permission)"));
  }
  std::printf("flotilla-expert-worker: listening on %s:%d\n",
              options.host.c_str(), bound_port);
  std::fflush(stdout);

  int signal_number = 0;
  while (sigwait(&signals, &signal_number) != 0) {
  }
  std::fprintf(stderr, "flotilla-expert-worker: %s received, shutting down\n",
               signal_number == SIGINT ? "SIGINT" : "SIGTERM");
  // Health first, so probes stop routing to us while calls drain.
  if (grpc::HealthCheckServiceInterface* health =
          server->GetHealthCheckService()) {
    health->Shutdown();
  }
  server->Shutdown(std::chrono::system_clock::now() + kDrainTimeout);
  server->Wait();
  return absl::OkStatus();
}

}  // namespace flotilla::expert_worker
