#include "expert-worker/expert_service.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "expert-worker/server.h"

namespace flotilla::expert_worker {

ExpertServiceImpl::ExpertServiceImpl(ExpertCompute* compute,
                                     WorkerMetrics* metrics)
    : compute_(compute),
      metrics_(metrics),
      info_(MakeInfo(*compute)),
      queue_(kMaxQueuedCalls) {}

grpc::ServerUnaryReactor* ExpertServiceImpl::Compute(
    grpc::CallbackServerContext* context, const v1::ComputeRequest* request,
    v1::ComputeResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // std::function needs a copyable job, hence shared ownership.
  auto admitted = std::make_shared<AdmittedCompute>();
  if (grpc::Status s =
          AdmitCompute(compute_, *request, RpcClock::now(), admitted.get());
      !s.ok()) {
    if (metrics_ != nullptr) metrics_->ComputeDone(s.error_code(), nullptr);
    reactor->Finish(s);
    return reactor;
  }
  const bool queued =
      queue_.Push([this, context, request, response, reactor, admitted] {
        if (context->IsCancelled()) {
          // The client gave up (deadline, retry on a replica): do not
          // spend the disk on an answer nobody reads.
          if (metrics_ != nullptr) {
            metrics_->ComputeDone(grpc::StatusCode::CANCELLED, nullptr);
          }
          reactor->Finish(grpc::Status(grpc::StatusCode::CANCELLED,
                                       "cancelled before it ran"));
          return;
        }
        grpc::Status s =
            RunAdmittedCompute(compute_, *request, *admitted, response);
        if (metrics_ != nullptr) {
          metrics_->ComputeDone(s.error_code(),
                                s.ok() ? &response->stats() : nullptr);
        }
        reactor->Finish(s);
      });
  if (!queued) {
    if (metrics_ != nullptr) {
      metrics_->ComputeDone(grpc::StatusCode::RESOURCE_EXHAUSTED, nullptr);
    }
    reactor->Finish(
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     absl::StrCat("worker busy: ", kMaxQueuedCalls,
                                  " calls already queued, or shutting down")));
  }
  return reactor;
}

grpc::ServerUnaryReactor* ExpertServiceImpl::Prefetch(
    grpc::CallbackServerContext* context, const v1::PrefetchRequest* request,
    v1::PrefetchResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  std::vector<uint32_t> experts;
  if (grpc::Status s = AdmitPrefetch(*compute_, *request, &experts); !s.ok()) {
    reactor->Finish(s);
    return reactor;
  }
  const int64_t layer = request->layer();
  // Advisory: a hint that cannot be queued is answered "0 scheduled".
  const bool queued = queue_.Push(
      [this, reactor, response, layer, experts = std::move(experts)] {
        absl::StatusOr<uint32_t> n = compute_->Prefetch(layer, experts);
        response->set_experts_scheduled(n.ok() ? *n : 0);
        if (metrics_ != nullptr) metrics_->PrefetchDone(n.ok() ? *n : 0);
        reactor->Finish(grpc::Status::OK);
      });
  if (!queued) {
    response->set_experts_scheduled(0);
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

grpc::ServerUnaryReactor* ExpertServiceImpl::Info(
    grpc::CallbackServerContext* context, const v1::InfoRequest* /*request*/,
    v1::InfoResponse* response) {
  *response = info_;
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace flotilla::expert_worker
