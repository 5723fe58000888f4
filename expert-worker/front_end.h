// The worker's gRPC front ends for ExpertService. Both answer every
// request the same way (compute_rpc.h); they differ in how a call reaches
// the compute thread:
//
//   * CallbackFrontEnd (default): gRPC's callback threads parse, validate
//     and queue each call for one compute thread, which finishes it. No gRPC
//     thread ever blocks on disk or compute. Health and reflection are
//     gRPC's own services.
//   * PollingFrontEnd (--busy-poll-us > 0): every method, health and
//     reflection included, is an async-API method on one completion queue
//     that the compute thread itself polls, without sleeping for up to the
//     given time after each event. It is the process's only gRPC poller, so
//     a request is read, run and answered on that one thread, with no
//     hand-off between threads and no wake-up while the coordinator keeps
//     calling. Costs: one CPU spins between calls, and calls run in arrival
//     order without a queue (gRPC holds calls that arrive while one runs);
//     Info, Prefetch and health calls too wait for a running Compute.
//     With `when_due`, a gap between calls that was longer than the poll at
//     the last step is slept through until shortly before the next call is
//     due (next_call_timer.h).
//
// Includes gRPC headers: only for the worker's server .cc files.
#ifndef FLOTILLA_EXPERT_WORKER_FRONT_END_H_
#define FLOTILLA_EXPERT_WORKER_FRONT_END_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "expert-worker/compute_rpc.h"

namespace flotilla::expert_worker {

class FrontEnd {
 public:
  virtual ~FrontEnd() = default;
  // What to register with the server.
  virtual std::vector<grpc::Service*> services() = 0;
  // Serves the methods no service registers (may be null).
  virtual grpc::AsyncGenericService* generic_service() { return nullptr; }
  // Whether Start needs a server completion queue (async methods).
  virtual bool needs_queue() const = 0;
  // Whether it serves health and reflection itself (else gRPC's own do).
  virtual bool serves_standard_services() const = 0;
  // Once the server is running; `cq` is null unless needs_queue().
  virtual void Start(std::unique_ptr<grpc::ServerCompletionQueue> cq) = 0;
  // At a shutdown signal, before grpc::Server::Shutdown: health reports
  // NOT_SERVING (when served here; server.cc does it for gRPC's own).
  virtual void BeginShutdown() {}
  // After grpc::Server::Shutdown returned: finishes what is queued, stops
  // the compute thread. Idempotent.
  virtual void Stop() = 0;
  // For the exit line, after Stop: the front end's own counters, or "".
  virtual std::string StatsLine() const { return ""; }
};

std::unique_ptr<FrontEnd> MakeCallbackFrontEnd(ExpertCompute* compute);
std::unique_ptr<FrontEnd> MakePollingFrontEnd(ExpertCompute* compute,
                                              std::chrono::microseconds spin,
                                              bool when_due);

// Runs a job on the thread that may call ExpertCompute::Run / Prefetch;
// false when it cannot take it (queue full or stopping).
using JobRunner = std::function<bool(std::function<void()>)>;

// Info and Prefetch of the callback front end. `Base` is a generated
// ExpertService variant whose Info and Prefetch use the callback API.
template <typename Base>
class InfoAndPrefetch : public Base {
 public:
  InfoAndPrefetch(ExpertCompute* compute, JobRunner jobs)
      : compute_(compute), info_(MakeInfo(*compute)), jobs_(std::move(jobs)) {}

  grpc::ServerUnaryReactor* Prefetch(grpc::CallbackServerContext* context,
                                     const v1::PrefetchRequest* request,
                                     v1::PrefetchResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    std::vector<uint32_t> experts;
    if (grpc::Status s = AdmitPrefetch(*compute_, *request, &experts);
        !s.ok()) {
      reactor->Finish(s);
      return reactor;
    }
    const int64_t layer = request->layer();
    // Advisory: a hint that cannot be queued is answered "0 scheduled".
    const bool queued =
        jobs_([this, reactor, response, layer, experts = std::move(experts)] {
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
                                 const v1::InfoRequest* /*request*/,
                                 v1::InfoResponse* response) override {
    *response = info_;
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 protected:
  ExpertCompute* const compute_;

 private:
  const v1::InfoResponse info_;
  const JobRunner jobs_;
};

}  // namespace flotilla::expert_worker

#endif  // FLOTILLA_EXPERT_WORKER_FRONT_END_H_
