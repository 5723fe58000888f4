// The --busy-poll-us front end: every method of the worker's server is an
// async-API method on one completion queue that the compute thread polls
// itself (see front_end.h).
//
// Why every method: gRPC (epoll1) lets one thread at a time poll the
// process's sockets and hands that role to any other thread waiting on a
// completion queue. Callback methods (gRPC's own health service included)
// bring such threads, and so do sync methods (its reflection service). With
// any of them the compute thread loses the role between two polls; the
// request is then read by a thread asleep in epoll, whose wake-up the
// sender pays inside sendmsg (a paravirtualized IPI on our VMs, ~0.1 ms).
// So here the compute thread is the only poller: it reads each request
// itself, runs it and writes the answer, and health and reflection are
// served on the same queue (polled_standard_services.h).
#include <grpcpp/alarm.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "expert-worker/front_end.h"
#include "expert-worker/next_call_timer.h"
#include "expert-worker/server.h"
#include "shared/base/poll_timing.h"
#include "shared/transport/cq_poll.h"
#include "shared/transport/polled_standard_services.h"

namespace flotilla::expert_worker {
namespace {

using transport::PolledOp;
using Service = v1::ExpertService::AsyncService;

// One unary call of `Service` from arrival to the end of its Finish.
// `Request` asks gRPC for the next call of the method on our queue;
// `Handle` answers an arrived one (on the polling thread), and may leave in
// `hold` what must live until Finish has serialized the answer.
template <typename Req, typename Resp>
class UnaryCall final : public PolledOp {
 public:
  using RequestFn = void (Service::*)(grpc::ServerContext*, Req*,
                                      grpc::ServerAsyncResponseWriter<Resp>*,
                                      grpc::CompletionQueue*,
                                      grpc::ServerCompletionQueue*, void*);
  using HandleFn =
      std::function<grpc::Status(const grpc::ServerContext&, const Req&, Resp*,
                                 std::shared_ptr<void>* hold)>;
  // Called once an OK answer has been written (may be empty).
  using SentFn = std::function<void(const Req&)>;

  // Starts waiting for the next call of the method.
  static void Await(Service* service, RequestFn request, HandleFn handle,
                    grpc::ServerCompletionQueue* cq, SentFn sent = nullptr) {
    auto* call =
        new UnaryCall(service, request, std::move(handle), cq, std::move(sent));
    (service->*request)(&call->context_, &call->request_, &call->writer_, cq,
                        cq, call);
  }

  bool Proceed(bool ok) override {
    if (finishing_) {  // Finish is done
      if (ok && answered_ok_ && sent_ != nullptr) sent_(request_);
      return false;
    }
    if (!ok) return false;  // shutting down
    // Wait for the next call before running this one, so that gRPC can
    // match a call that arrives meanwhile without more work later.
    Await(service_, request_fn_, handle_, cq_, sent_);
    std::shared_ptr<void> hold;
    const grpc::Status status = handle_(context_, request_, &response_, &hold);
    finishing_ = true;
    answered_ok_ = status.ok();
    if (status.ok()) {
      writer_.Finish(response_, status, this);
    } else {
      writer_.FinishWithError(status, this);
    }
    // `hold` ends here: Finish has serialized the response.
    return true;
  }

 private:
  UnaryCall(Service* service, RequestFn request, HandleFn handle,
            grpc::ServerCompletionQueue* cq, SentFn sent)
      : service_(service),
        request_fn_(request),
        handle_(std::move(handle)),
        sent_(std::move(sent)),
        cq_(cq) {}

  Service* const service_;
  const RequestFn request_fn_;
  const HandleFn handle_;
  const SentFn sent_;
  grpc::ServerCompletionQueue* const cq_;
  grpc::ServerContext context_;
  Req request_;
  Resp response_;
  grpc::ServerAsyncResponseWriter<Resp> writer_{&context_};
  bool finishing_ = false;  // its next event is the end of Finish
  bool answered_ok_ = false;
};

grpc::Status HandleCompute(ExpertCompute* compute, NextCallTimer* timer,
                           const grpc::ServerContext& context,
                           const v1::ComputeRequest& request,
                           v1::ComputeResponse* response,
                           std::shared_ptr<void>* hold) {
  timer->Arrived(NextCallTimer::Clock::now());
  if (std::chrono::system_clock::now() > context.deadline()) {
    // It waited inside gRPC while earlier calls ran, past its deadline: the
    // client has given up (and retried on a replica), so do not spend the
    // disk on an answer nobody reads.
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "deadline passed before the call ran");
  }
  // The call's memory charge (in `admitted`) lasts until Finish has
  // serialized the response, which it covers.
  auto admitted = std::make_shared<AdmittedCompute>();
  *hold = admitted;
  grpc::Status status =
      AdmitCompute(compute, request, RpcClock::now(), admitted.get());
  if (!status.ok()) return status;
  return RunAdmittedCompute(compute, request, *admitted, response);
}

class ComputeStreamCall;

// The open ComputeStreams, so that a shutdown can end them: a coordinator
// keeps its stream open between tokens, which would otherwise hold the
// shutdown for its whole drain time. Touched by the polling thread only.
struct OpenStreams {
  std::set<ComputeStreamCall*> calls;
  bool closing = false;            // after a shutdown signal
  NextCallTimer* timer = nullptr;  // the front end's
};

// One ComputeStream: each request read is answered by one response
// written, as Compute would answer it; an error ends the stream with its
// status. Reads and writes alternate, so one call runs at a time.
class ComputeStreamCall final : public PolledOp {
 public:
  static void Await(Service* service, ExpertCompute* compute,
                    grpc::ServerCompletionQueue* cq, OpenStreams* open) {
    auto* call = new ComputeStreamCall(service, compute, cq, open);
    service->RequestComputeStream(&call->context_, &call->stream_, cq, cq,
                                  call);
  }

  ~ComputeStreamCall() override { open_->calls.erase(this); }

  bool Proceed(bool ok) override {
    switch (step_) {
      case kArrive:
        if (!ok) return false;  // shutting down
        Await(service_, compute_, cq_, open_);
        open_->calls.insert(this);
        if (open_->closing) {
          Finish(ShuttingDown());
        } else {
          Read();
        }
        return true;
      case kRead:
        if (!ok) {  // the coordinator closed its side, or went away
          Finish(grpc::Status::OK);
          return true;
        }
        Answer();
        return true;
      case kWrite:
        if (!ok) {  // the stream broke: nothing more to send
          Finish(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
          return true;
        }
        open_->timer->Answered(request_.layer(), NextCallTimer::Clock::now());
        if (open_->closing) {
          Finish(ShuttingDown());
        } else {
          Read();
        }
        return true;
      case kFinish:
        // Close's Finish leaves the read it interrupted to complete too.
        return --finish_events_ > 0;
    }
    return false;
  }

  // At a shutdown: a stream waiting for its next request ends now, with
  // UNAVAILABLE (its coordinator retries elsewhere); one whose answer is
  // being written ends after it. A server may finish with a read pending
  // (the read then fails); cancelling instead would let grpc::Server's
  // shutdown return before this call's last operation is started.
  void Close() {
    if (step_ != kRead) return;
    finish_events_ = 2;
    Finish(ShuttingDown());
  }

 private:
  enum Step { kArrive, kRead, kWrite, kFinish };

  ComputeStreamCall(Service* service, ExpertCompute* compute,
                    grpc::ServerCompletionQueue* cq, OpenStreams* open)
      : service_(service),
        compute_(compute),
        cq_(cq),
        open_(open),
        stream_(&context_) {}

  static grpc::Status ShuttingDown() {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "the worker is shutting down");
  }

  void Read() {
    step_ = kRead;
    request_.Clear();
    stream_.Read(&request_, this);
  }
  void Finish(const grpc::Status& status) {
    step_ = kFinish;
    stream_.Finish(status, this);
  }
  void Answer() {
    open_->timer->Arrived(NextCallTimer::Clock::now());
    // The memory charge lasts until Write has serialized the response.
    AdmittedCompute admitted;
    grpc::Status status =
        AdmitCompute(compute_, request_, RpcClock::now(), &admitted);
    response_.Clear();
    if (status.ok()) {
      status = RunAdmittedCompute(compute_, request_, admitted, &response_);
    }
    if (!status.ok()) {
      Finish(status);
      return;
    }
    step_ = kWrite;
    stream_.Write(response_, this);
  }

  Service* const service_;
  ExpertCompute* const compute_;
  grpc::ServerCompletionQueue* const cq_;
  OpenStreams* const open_;
  grpc::ServerContext context_;
  grpc::ServerAsyncReaderWriter<v1::ComputeResponse, v1::ComputeRequest>
      stream_;
  v1::ComputeRequest request_;
  v1::ComputeResponse response_;
  Step step_ = kArrive;
  int finish_events_ = 1;  // events left once Finish is started
};

// Info of a polling worker: it serves ComputeStream.
v1::InfoResponse PollingInfo(const ExpertCompute& compute) {
  v1::InfoResponse info = MakeInfo(compute);
  info.set_compute_stream(true);
  return info;
}

class PollingFrontEnd final : public FrontEnd {
 public:
  PollingFrontEnd(ExpertCompute* compute, std::chrono::microseconds spin,
                  bool when_due)
      : compute_(compute),
        info_(PollingInfo(*compute)),
        spin_(spin),
        timer_(spin, base::kCoarseTimerSlack, when_due) {
    open_streams_.timer = &timer_;
  }
  ~PollingFrontEnd() override { Stop(); }

  std::vector<grpc::Service*> services() override { return {&service_}; }
  grpc::AsyncGenericService* generic_service() override {
    return standard_.generic_service();
  }
  bool needs_queue() const override { return true; }
  bool serves_standard_services() const override { return true; }

  void Start(std::unique_ptr<grpc::ServerCompletionQueue> cq) override {
    cq_ = std::move(cq);
    grpc::ServerCompletionQueue* q = cq_.get();
    ExpertCompute* compute = compute_;
    NextCallTimer* timer = &timer_;
    UnaryCall<v1::ComputeRequest, v1::ComputeResponse>::Await(
        &service_, &Service::RequestCompute,
        [compute, timer](const grpc::ServerContext& context,
                         const v1::ComputeRequest& request,
                         v1::ComputeResponse* response,
                         std::shared_ptr<void>* hold) {
          return HandleCompute(compute, timer, context, request, response,
                               hold);
        },
        q,
        [timer](const v1::ComputeRequest& request) {
          timer->Answered(request.layer(), NextCallTimer::Clock::now());
        });
    UnaryCall<v1::InfoRequest, v1::InfoResponse>::Await(
        &service_, &Service::RequestInfo,
        [this](const grpc::ServerContext&, const v1::InfoRequest&,
               v1::InfoResponse* response, std::shared_ptr<void>*) {
          *response = info_;
          return grpc::Status::OK;
        },
        q);
    UnaryCall<v1::PrefetchRequest, v1::PrefetchResponse>::Await(
        &service_, &Service::RequestPrefetch,
        [compute](const grpc::ServerContext&,
                  const v1::PrefetchRequest& request,
                  v1::PrefetchResponse* response, std::shared_ptr<void>*) {
          std::vector<uint32_t> experts;
          if (grpc::Status s = AdmitPrefetch(*compute, request, &experts);
              !s.ok()) {
            return s;
          }
          // Advisory and non-blocking: it only queues reads.
          absl::StatusOr<uint32_t> n =
              compute->Prefetch(request.layer(), experts);
          response->set_experts_scheduled(n.ok() ? *n : 0);
          return grpc::Status::OK;
        },
        q);
    ComputeStreamCall::Await(&service_, compute, q, &open_streams_);
    standard_.Start(q);
    thread_ = std::thread([this] { Loop(); });
  }

  void BeginShutdown() override {
    // From the signal thread: the polling thread marks health NOT_SERVING
    // (and tells watchers) at its next event, which this alarm makes now.
    std::lock_guard<std::mutex> lock(mu_);
    if (cq_ == nullptr || shutdown_alarm_ != nullptr) return;
    shutdown_alarm_ = std::make_unique<grpc::Alarm>();
    shutdown_alarm_->Set(cq_.get(), gpr_now(GPR_CLOCK_MONOTONIC),
                         &shutdown_tag_);
  }

  void Stop() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    if (cq_ == nullptr) return;
    // gRPC's order: the server is shut down already; now the queue, whose
    // remaining events (cancelled waits for next calls) the loop drains
    // before it returns.
    cq_->Shutdown();
    if (thread_.joinable()) thread_.join();
  }

  std::string StatsLine() const override {
    // Read after Stop has joined the polling thread.
    return absl::StrCat("polling: ", timer_.timed_waits(),
                        " waits slept until a call was due, ",
                        timer_.early_calls(), " calls came sooner");
  }

 private:
  void Loop() {
    void* tag = nullptr;
    bool ok = false;
    while (transport::NextWithSpinFrom(
               cq_.get(), timer_.PollFrom(NextCallTimer::Clock::now()), spin_,
               std::chrono::system_clock::time_point::max(), &tag,
               &ok) == grpc::CompletionQueue::GOT_EVENT) {
      if (tag == &shutdown_tag_) {
        standard_.SetNotServing();
        open_streams_.closing = true;
        // Close may end a call, which leaves the set: iterate a copy.
        const std::set<ComputeStreamCall*> calls = open_streams_.calls;
        for (ComputeStreamCall* call : calls) call->Close();
        continue;
      }
      auto* op = static_cast<PolledOp*>(tag);
      if (!op->Proceed(ok)) delete op;
    }
  }

  ExpertCompute* const compute_;
  const v1::InfoResponse info_;
  const std::chrono::microseconds spin_;
  NextCallTimer timer_;  // the polling thread's
  Service service_;
  OpenStreams open_streams_;  // the polling thread's
  transport::PolledStandardServices standard_{
      {v1::ExpertService::service_full_name()}};
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::thread thread_;
  int shutdown_tag_ = 0;  // its address tags the shutdown alarm's event
  std::mutex mu_;
  std::unique_ptr<grpc::Alarm> shutdown_alarm_;  // guarded by mu_
  bool stopping_ = false;                        // guarded by mu_
};

}  // namespace

std::unique_ptr<FrontEnd> MakePollingFrontEnd(ExpertCompute* compute,
                                              std::chrono::microseconds spin,
                                              bool when_due) {
  return std::make_unique<PollingFrontEnd>(compute, spin, when_due);
}

}  // namespace flotilla::expert_worker
