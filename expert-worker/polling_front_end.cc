// The --busy-poll-us front end: Compute through gRPC's async API on a
// completion queue that the compute thread polls itself (see front_end.h).
#include <grpcpp/alarm.h>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "expert-worker/front_end.h"
#include "expert-worker/server.h"
#include "shared/transport/cq_poll.h"

namespace flotilla::expert_worker {
namespace {

// Compute is async; Info and Prefetch stay on the callback API, so that
// they are answered while a long call runs on the polling thread.
using HybridService = v1::ExpertService::WithAsyncMethod_Compute<
    v1::ExpertService::WithCallbackMethod_Prefetch<
        v1::ExpertService::WithCallbackMethod_Info<
            v1::ExpertService::Service>>>;

class PollingExpertService final : public InfoAndPrefetch<HybridService> {
 public:
  PollingExpertService(ExpertCompute* compute, JobRunner jobs)
      : InfoAndPrefetch(compute, std::move(jobs)) {}
  ExpertCompute* compute() const { return compute_; }
};

// One Compute RPC from arrival to the end of its Finish.
struct ComputeRpc {
  grpc::ServerContext context;
  v1::ComputeRequest request;
  v1::ComputeResponse response;
  grpc::ServerAsyncResponseWriter<v1::ComputeResponse> writer{&context};
  bool finishing = false;  // its next event is the end of Finish
};

class PollingFrontEnd final : public FrontEnd {
 public:
  PollingFrontEnd(ExpertCompute* compute, std::chrono::microseconds spin)
      : service_(compute,
                 [this](std::function<void()> job) {
                   return PushJob(std::move(job));
                 }),
        spin_(spin) {}
  ~PollingFrontEnd() override { Stop(); }

  grpc::Service* service() override { return &service_; }
  bool needs_queue() const override { return true; }

  void Start(std::unique_ptr<grpc::ServerCompletionQueue> cq) override {
    cq_ = std::move(cq);
    AwaitNextCall();
    thread_ = std::thread([this] { Loop(); });
  }

  void Stop() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    if (cq_ == nullptr) return;
    // gRPC's order: the server is shut down already; now the queue, whose
    // remaining events (the cancelled wait for a next call) the loop
    // drains before it returns.
    cq_->Shutdown();
    if (thread_.joinable()) thread_.join();
    RunJobs();  // hints queued after the last wake-up: answered, not lost
  }

 private:
  // Asks gRPC for the next Compute on our queue; it arrives as an event.
  void AwaitNextCall() {
    auto* rpc = new ComputeRpc;
    service_.RequestCompute(&rpc->context, &rpc->request, &rpc->writer,
                            cq_.get(), cq_.get(), rpc);
  }

  void Loop() {
    void* tag = nullptr;
    bool ok = false;
    while (transport::NextWithSpin(cq_.get(), spin_, &tag, &ok)) {
      if (tag == &wake_tag_) {
        RunJobs();
        continue;
      }
      std::unique_ptr<ComputeRpc> rpc(static_cast<ComputeRpc*>(tag));
      if (rpc->finishing || !ok) continue;  // done, or shutting down
      // Wait for the next call before running this one, so that gRPC can
      // match a call that arrives meanwhile without more work later.
      AwaitNextCall();
      AdmittedCompute admitted;
      grpc::Status status;
      if (std::chrono::system_clock::now() > rpc->context.deadline()) {
        // It waited inside gRPC while earlier calls ran, past its deadline:
        // the client has given up (and retried on a replica), so do not
        // spend the disk on an answer nobody reads.
        status = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                              "deadline passed before the call ran");
      } else {
        status = AdmitCompute(service_.compute(), rpc->request, RpcClock::now(),
                              &admitted);
      }
      if (status.ok()) {
        status = RunAdmittedCompute(service_.compute(), rpc->request, admitted,
                                    &rpc->response);
      }
      rpc->finishing = true;
      ComputeRpc* raw = rpc.release();  // owned by its Finish event now
      if (status.ok()) {
        raw->writer.Finish(raw->response, status, raw);
      } else {
        raw->writer.FinishWithError(status, raw);
      }
      // `admitted` (and its memory charge) ends here: Finish has
      // serialized the response.
    }
  }

  // From gRPC's callback threads (Prefetch): queue the job and wake the
  // polling thread with an alarm on its queue, once per batch of jobs.
  bool PushJob(std::function<void()> job) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || jobs_.size() >= kMaxQueuedCalls) return false;
    jobs_.push_back(std::move(job));
    if (!wake_pending_) {
      wake_pending_ = true;
      wake_ = std::make_unique<grpc::Alarm>();
      wake_->Set(cq_.get(), gpr_now(GPR_CLOCK_MONOTONIC), &wake_tag_);
    }
    return true;
  }

  void RunJobs() {
    std::deque<std::function<void()>> jobs;
    {
      std::lock_guard<std::mutex> lock(mu_);
      wake_pending_ = false;
      jobs.swap(jobs_);
    }
    for (auto& job : jobs) job();
  }

  PollingExpertService service_;
  const std::chrono::microseconds spin_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::thread thread_;
  int wake_tag_ = 0;  // its address tags the job alarm's events
  std::mutex mu_;
  std::deque<std::function<void()>> jobs_;  // guarded by mu_
  std::unique_ptr<grpc::Alarm> wake_;       // guarded by mu_
  bool wake_pending_ = false;               // guarded by mu_
  bool stopping_ = false;                   // guarded by mu_
};

}  // namespace

std::unique_ptr<FrontEnd> MakePollingFrontEnd(ExpertCompute* compute,
                                              std::chrono::microseconds spin) {
  return std::make_unique<PollingFrontEnd>(compute, spin);
}

}  // namespace flotilla::expert_worker
