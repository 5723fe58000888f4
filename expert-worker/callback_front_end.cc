// The default front end: Compute through gRPC's callback API, run on one
// compute thread (see front_end.h).
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "expert-worker/front_end.h"
#include "expert-worker/server.h"

namespace flotilla::expert_worker {
namespace {

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

// Every handler validates and answers or enqueues without blocking; the
// compute thread finishes Compute and Prefetch reactors.
class CallbackExpertService final
    : public InfoAndPrefetch<v1::ExpertService::CallbackService> {
 public:
  explicit CallbackExpertService(ExpertCompute* compute)
      : InfoAndPrefetch(compute, [this](std::function<void()> job) {
          return queue_.Push(std::move(job));
        }) {}

  void StopCompute() { queue_.Stop(); }

  grpc::ServerUnaryReactor* Compute(grpc::CallbackServerContext* context,
                                    const v1::ComputeRequest* request,
                                    v1::ComputeResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    // std::function needs a copyable job, hence shared ownership.
    auto admitted = std::make_shared<AdmittedCompute>();
    if (grpc::Status s =
            AdmitCompute(compute_, *request, RpcClock::now(), admitted.get());
        !s.ok()) {
      reactor->Finish(s);
      return reactor;
    }
    const bool queued =
        queue_.Push([this, context, request, response, reactor, admitted] {
          if (context->IsCancelled()) {
            // The client gave up (deadline, retry on a replica): do not
            // spend the disk on an answer nobody reads.
            reactor->Finish(grpc::Status(grpc::StatusCode::CANCELLED,
                                         "cancelled before it ran"));
            return;
          }
          reactor->Finish(
              RunAdmittedCompute(compute_, *request, *admitted, response));
        });
    if (!queued) {
      reactor->Finish(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("worker busy: ", kMaxQueuedCalls,
                       " calls already queued, or shutting down")));
    }
    return reactor;
  }

 private:
  ComputeQueue queue_;
};

class CallbackFrontEnd final : public FrontEnd {
 public:
  explicit CallbackFrontEnd(ExpertCompute* compute) : service_(compute) {}
  std::vector<grpc::Service*> services() override { return {&service_}; }
  bool needs_queue() const override { return false; }
  bool serves_standard_services() const override { return false; }
  void Start(std::unique_ptr<grpc::ServerCompletionQueue>) override {}
  void Stop() override { service_.StopCompute(); }

 private:
  CallbackExpertService service_;
};

}  // namespace

std::unique_ptr<FrontEnd> MakeCallbackFrontEnd(ExpertCompute* compute) {
  return std::make_unique<CallbackFrontEnd>(compute);
}

}  // namespace flotilla::expert_worker
