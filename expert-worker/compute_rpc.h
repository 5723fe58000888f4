// The protocol half of the worker's ExpertService (expert_service.h):
// admitting a request (validation and the --mem charge), running an
// admitted call into its response, checking Prefetch hints, and the Info
// answer. Kept apart from the service so each piece is small and the
// admission rules can be read (and fuzzed) on their own.
//
// Includes gRPC headers: only for the worker's server .cc files.
#ifndef FLOTILLA_EXPERT_WORKER_COMPUTE_RPC_H_
#define FLOTILLA_EXPERT_WORKER_COMPUTE_RPC_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "expert-worker/expert_compute.h"
#include "shared/transport/transport.h"

namespace flotilla::expert_worker {

using RpcClock = std::chrono::steady_clock;

// The memory one Compute call holds, charged to the worker's --mem ledger
// (owner kCallsOwner) from its arrival until its response has been handed
// to gRPC (Finish serializes it). gRPC frees the response object and the
// sent bytes just after; nothing waits for that, since a custom reactor's
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

// A Compute request that passed validation and holds its memory charge.
// `call` borrows the request's activations: the request must outlive it.
struct AdmittedCompute {
  ComputeCall call;
  ComputeShape shape;
  std::unique_ptr<CallCharge> charge;
  RpcClock::time_point received;
};

// Validates `request` and charges what it will hold. The error statuses are
// the answer to send: INVALID_ARGUMENT naming the problem, or
// RESOURCE_EXHAUSTED when the --mem budget cannot take the call.
grpc::Status AdmitCompute(ExpertCompute* compute,
                          const v1::ComputeRequest& request,
                          RpcClock::time_point received,
                          AdmittedCompute* admitted);

// Runs an admitted call (on the one thread that may call
// ExpertCompute::Run) and fills `response`, stats included. On an error the
// response is left empty and the status names the layer.
grpc::Status RunAdmittedCompute(ExpertCompute* compute,
                                const v1::ComputeRequest& request,
                                const AdmittedCompute& admitted,
                                v1::ComputeResponse* response);

// Checks a Prefetch hint and copies its experts; INVALID_ARGUMENT naming
// the problem otherwise. The count is checked before anything is copied.
grpc::Status AdmitPrefetch(const ExpertCompute& compute,
                           const v1::PrefetchRequest& request,
                           std::vector<uint32_t>* experts);

v1::InfoResponse MakeInfo(const ExpertCompute& compute);

}  // namespace flotilla::expert_worker

#endif  // FLOTILLA_EXPERT_WORKER_COMPUTE_RPC_H_
