#include "expert-worker/server.h"

#include <grpcpp/health_check_service_interface.h>
#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "shared/base/elapsed.h"
#include "shared/io/memory_budget.h"
#include "shared/transport/transport.h"

namespace flotilla::expert_worker {
namespace {

using Clock = std::chrono::steady_clock;

// How long in-flight calls may take to finish after a shutdown signal
// before they are cancelled. Compute calls are one layer of one step, so
// well under this on any sane disk.
constexpr std::chrono::seconds kDrainTimeout{5};

using base::Seconds;

// One thread running jobs in arrival order. Push never blocks: it refuses
// when kMaxQueuedCalls are waiting or the queue is stopping.
class ComputeQueue {
 public:
  ComputeQueue() : thread_([this] { Loop(); }) {}
  ~ComputeQueue() { Stop(); }

  bool Push(std::function<void()> job) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || jobs_.size() >= kMaxQueuedCalls) return false;
    jobs_.push_back(std::move(job));
    cv_.notify_one();
    return true;
  }

  // Runs what is queued, then joins. Idempotent.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      cv_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Loop() {
    while (true) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stopping and drained
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;  // guarded by mu_
  bool stopping_ = false;                   // guarded by mu_
  std::thread thread_;
};

// The memory one Compute call holds, charged to the worker's --mem ledger
// (owner kCallsOwner) from its arrival until its response has been handed
// to gRPC (Finish serializes it): held by the queued job, so released when
// the job is destroyed, run or not. gRPC frees the response object and
// the sent bytes just after; no custom reactor waits for that, since its
// OnDone would cost a wake-up of another gRPC thread per call.
class CallCharge {
 public:
  CallCharge(io::MemoryAccountant* accountant, uint64_t bytes)
      : accountant_(accountant), bytes_(bytes) {}
  CallCharge(const CallCharge&) = delete;
  CallCharge& operator=(const CallCharge&) = delete;
  ~CallCharge() { accountant_->Release(kCallsOwner, bytes_); }

 private:
  io::MemoryAccountant* const accountant_;
  const uint64_t bytes_;
};

// Bytes of a parsed request besides the activations it borrows to the
// call: its wire copy and the assignment messages.
uint64_t RequestBytes(const v1::ComputeRequest& request) {
  return request.ByteSizeLong() +
         static_cast<uint64_t>(request.activations_size()) * sizeof(float) +
         static_cast<uint64_t>(request.assignments_size()) *
             (sizeof(v1::Assignment) + sizeof(void*));
}

v1::InfoResponse MakeInfo(const ExpertCompute& compute) {
  const ShardPlan& plan = compute.plan();
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
  info.set_replicas(static_cast<uint32_t>(plan.replicas));
  info.set_placement(plan.placement);
  info.set_fetch_slots(static_cast<uint32_t>(compute.options().fetch_slots));
  return info;
}

// Converts the request into a ComputeCall (no copy of the activations).
// False with `error` set when an index does not fit the engine's int32.
bool ToCall(const v1::ComputeRequest& request, ComputeCall* call,
            std::string* error) {
  call->layer = request.layer();
  call->row_width = request.row_width();
  call->num_rows = request.num_rows();
  call->activations = request.activations().data();
  call->activations_size = static_cast<uint64_t>(request.activations_size());
  call->expert_outputs = request.output() == v1::OUTPUT_KIND_EXPERT_OUTPUTS;
  if (request.output() != v1::OUTPUT_KIND_EXPERT_OUTPUTS &&
      request.output() != v1::OUTPUT_KIND_ROW_SUMS) {
    *error = absl::StrCat("unknown output kind ", request.output());
    return false;
  }
  if (request.assignments_size() > static_cast<int>(kMaxAssignmentsPerCall)) {
    *error = absl::StrCat(request.assignments_size(),
                          " assignments (must be in [1, ",
                          kMaxAssignmentsPerCall, "])");
    return false;
  }
  call->assignments.resize(request.assignments_size());
  constexpr uint32_t kMax = std::numeric_limits<int32_t>::max();
  for (int i = 0; i < request.assignments_size(); ++i) {
    const v1::Assignment& a = request.assignments(i);
    if (a.row() > kMax || a.expert() > kMax) {
      *error = absl::StrCat("assignment ", i, ": row ", a.row(), " / expert ",
                            a.expert(), " out of range");
      return false;
    }
    call->assignments[i] =
        experts::ExpertAssignment{static_cast<int32_t>(a.row()),
                                  static_cast<int32_t>(a.expert()), a.weight()};
  }
  return true;
}

// Every handler validates and answers or enqueues without blocking; the
// compute thread finishes Compute and Prefetch reactors.
class ExpertServiceImpl final : public v1::ExpertService::CallbackService {
 public:
  explicit ExpertServiceImpl(ExpertCompute* compute)
      : compute_(compute), info_(MakeInfo(*compute)) {}

  void StopCompute() { queue_.Stop(); }

  grpc::ServerUnaryReactor* Compute(grpc::CallbackServerContext* context,
                                    const v1::ComputeRequest* request,
                                    v1::ComputeResponse* response) override {
    const Clock::time_point received = Clock::now();
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    auto call = std::make_shared<ComputeCall>();
    std::string error;
    if (!ToCall(*request, call.get(), &error)) {
      reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, error));
      return reactor;
    }
    absl::StatusOr<ComputeShape> shape = compute_->Validate(*call);
    if (!shape.ok()) {
      reactor->Finish(transport::ToGrpcStatus(shape.status()));
      return reactor;
    }
    // Everything the call holds until it is answered, charged before it
    // is queued: a call the budget cannot take is refused, not run.
    io::MemoryAccountant& a = compute_->accountant();
    const uint64_t bytes =
        RequestBytes(*request) + compute_->CallBytes(*call, *shape);
    if (!a.Charge(kCallsOwner, bytes).ok()) {
      reactor->Finish(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("layer ", call->layer, ": the call needs ", bytes,
                       " bytes (request, response and scratch) but only ",
                       a.available(), " of the worker's ", a.budget(),
                       "-byte --mem budget are left; send smaller calls "
                       "(fewer rows) or give the worker more --mem")));
      return reactor;
    }
    auto charge = std::make_shared<CallCharge>(&a, bytes);
    auto shared_shape = std::make_shared<ComputeShape>(std::move(*shape));
    const bool queued = queue_.Push([this, context, request, response, reactor,
                                     call, shared_shape, received, charge] {
      RunCompute(context, *request, response, reactor, *call, *shared_shape,
                 received);
    });
    if (!queued) {
      reactor->Finish(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("worker busy: ", kMaxQueuedCalls,
                       " calls already queued, or shutting down")));
    }
    return reactor;
  }

  grpc::ServerUnaryReactor* Prefetch(grpc::CallbackServerContext* context,
                                     const v1::PrefetchRequest* request,
                                     v1::PrefetchResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    const int64_t layer = request->layer();
    if (request->experts_size() > compute_->plan().num_experts) {
      // Checked before copying: the count is bounded only by the message.
      reactor->Finish(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("prefetch: ", request->experts_size(),
                       " experts, more than the ", compute_->plan().num_experts,
                       " a layer has")));
      return reactor;
    }
    std::vector<uint32_t> experts(request->experts().begin(),
                                  request->experts().end());
    if (absl::Status valid = compute_->ValidatePrefetch(layer, experts);
        !valid.ok()) {
      reactor->Finish(transport::ToGrpcStatus(valid));
      return reactor;
    }
    // Advisory: a hint that cannot be queued is answered "0 scheduled".
    const bool queued = queue_.Push(
        [this, reactor, response, layer, experts = std::move(experts)] {
          absl::StatusOr<uint32_t> n = compute_->Prefetch(layer, experts);
          response->set_experts_scheduled(n.ok() ? *n : 0);
          reactor->Finish(grpc::Status::OK);
        });
    if (!queued) {
      response->set_experts_scheduled(0);
      reactor->Finish(grpc::Status::OK);
    }
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
  // On the compute thread.
  void RunCompute(grpc::CallbackServerContext* context,
                  const v1::ComputeRequest& request,
                  v1::ComputeResponse* response,
                  grpc::ServerUnaryReactor* reactor, const ComputeCall& call,
                  const ComputeShape& shape, Clock::time_point received) {
    const Clock::time_point start = Clock::now();
    if (context->IsCancelled()) {
      // The client gave up (deadline, retry on a replica): do not spend the
      // disk on an answer nobody reads.
      reactor->Finish(
          grpc::Status(grpc::StatusCode::CANCELLED, "cancelled before it ran"));
      return;
    }
    response->set_layer(request.layer());
    response->set_step_id(request.step_id());
    response->set_row_width(request.row_width());
    float* outputs = nullptr;
    double* sums = nullptr;
    if (call.expert_outputs) {
      response->mutable_expert_outputs()->Resize(
          static_cast<int>(shape.output_floats), 0.0f);
      outputs = response->mutable_expert_outputs()->mutable_data();
    } else {
      response->mutable_rows()->Add(shape.rows.begin(), shape.rows.end());
      response->mutable_row_sums()->Resize(
          static_cast<int>(shape.output_doubles), 0.0);
      sums = response->mutable_row_sums()->mutable_data();
    }
    ComputeCallStats stats;
    const absl::Status status =
        compute_->Run(call, shape, outputs, sums, &stats);
    if (!status.ok()) {
      response->Clear();
      reactor->Finish(transport::ToGrpcStatus(absl::Status(
          status.code(),
          absl::StrCat("layer ", call.layer, ": ", status.message()))));
      return;
    }
    v1::ComputeStats* s = response->mutable_stats();
    s->set_bytes_read(stats.bytes_read);
    s->set_read_seconds(stats.read_seconds);
    s->set_compute_seconds(stats.compute_seconds);
    s->set_cache_hits(stats.cache_hits);
    s->set_experts_computed(stats.experts_computed);
    s->set_prefetch_hits(stats.prefetch_hits);
    s->set_queue_seconds(Seconds(start - received));
    s->set_wall_seconds(Seconds(Clock::now() - received));
    reactor->Finish(grpc::Status::OK);
  }

  ExpertCompute* const compute_;
  const v1::InfoResponse info_;
  ComputeQueue queue_;
};

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
  ExpertServiceImpl service(compute);
  transport::ServerOptions server_options;
  server_options.host = options.host;
  server_options.port = options.port;
  server_options.tls = options.tls;
  server_options.max_message_bytes = kMaxMessageBytes;
  server_options.services.push_back(&service);
  int bound_port = 0;
  absl::StatusOr<std::unique_ptr<grpc::Server>> server =
      transport::StartServer(server_options, &bound_port);
  if (!server.ok()) return server.status();
  std::printf("flotilla-expert-worker: listening on %s:%d%s\n",
              options.host.c_str(), bound_port,
              options.tls.enabled()
                  ? (options.tls.ca.empty() ? " (TLS)" : " (mutual TLS)")
                  : "");
  std::fflush(stdout);

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
  (*server)->Wait();
  service.StopCompute();
  std::fprintf(stderr, "flotilla-expert-worker: experts: %s\n",
               compute->StatsLine().c_str());
  return absl::OkStatus();
}

}  // namespace flotilla::expert_worker
