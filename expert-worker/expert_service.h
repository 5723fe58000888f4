// flotilla.v1.ExpertService on gRPC's callback API. gRPC's threads only
// parse, validate (cheap, bounded: compute_rpc.h) and queue each Compute
// and Prefetch for the one compute thread (compute_queue.h), which finishes
// it; Info is answered at once. So no gRPC thread ever blocks on disk or
// compute, and Info and health stay responsive while a large call runs.
// ComputeStream (deprecated in the proto) is left unimplemented: gRPC
// answers it UNIMPLEMENTED.
//
// Includes gRPC headers: only for the worker's server .cc files.
#ifndef FLOTILLA_EXPERT_WORKER_EXPERT_SERVICE_H_
#define FLOTILLA_EXPERT_WORKER_EXPERT_SERVICE_H_

#include "expert-worker/compute_queue.h"
#include "expert-worker/compute_rpc.h"
#include "expert-worker/worker_metrics.h"

namespace flotilla::expert_worker {

class ExpertServiceImpl final : public v1::ExpertService::CallbackService {
 public:
  // `metrics` may be null; it must outlive the service.
  explicit ExpertServiceImpl(ExpertCompute* compute,
                             WorkerMetrics* metrics = nullptr);

  grpc::ServerUnaryReactor* Compute(grpc::CallbackServerContext* context,
                                    const v1::ComputeRequest* request,
                                    v1::ComputeResponse* response) override;
  grpc::ServerUnaryReactor* Prefetch(grpc::CallbackServerContext* context,
                                     const v1::PrefetchRequest* request,
                                     v1::PrefetchResponse* response) override;
  grpc::ServerUnaryReactor* Info(grpc::CallbackServerContext* context,
                                 const v1::InfoRequest* request,
                                 v1::InfoResponse* response) override;

  // After grpc::Server::Shutdown returned: runs what is queued and stops
  // the compute thread. Idempotent.
  void StopCompute() { queue_.Stop(); }

 private:
  ExpertCompute* const compute_;
  WorkerMetrics* const metrics_;
  const v1::InfoResponse info_;
  ComputeQueue queue_;
};

}  // namespace flotilla::expert_worker

#endif  // FLOTILLA_EXPERT_WORKER_EXPERT_SERVICE_H_
