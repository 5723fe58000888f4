#include "coordinator/remote/grpc_transport.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/transport/transport.h"

namespace flotilla::coordinator {
namespace {

std::chrono::system_clock::time_point DeadlineIn(int ms) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(ms);
}

// What a tag on the completion queue points at.
struct Tag {
  enum Kind { kInfo, kCompute, kPrefetch } kind = kInfo;
};

struct InfoTag : Tag {
  grpc::ClientContext context;
  v1::InfoResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::InfoResponse>> reader;
};

struct ComputeTag : Tag {
  ComputeCall* call = nullptr;
  grpc::ClientContext context;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::ComputeResponse>> reader;
};

struct PrefetchTag : Tag {
  grpc::ClientContext context;
  v1::PrefetchRequest request;
  v1::PrefetchResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::PrefetchResponse>> reader;
};

class GrpcTransport final : public WorkerTransport {
 public:
  explicit GrpcTransport(
      std::vector<std::unique_ptr<v1::ExpertService::Stub>> stubs)
      : stubs_(std::move(stubs)) {}

  ~GrpcTransport() override {
    for (const auto& [raw, tag] : prefetches_) tag->context.TryCancel();
    while (!prefetches_.empty()) {
      void* tag = nullptr;
      bool ok = false;
      if (!cq_.Next(&tag, &ok)) break;
      OnPrefetchDone(static_cast<PrefetchTag*>(static_cast<Tag*>(tag)));
    }
    cq_.Shutdown();
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok)) {
    }
  }

  std::vector<absl::StatusOr<v1::InfoResponse>> InfoAll(
      int deadline_ms, bool wait_for_ready) override {
    const size_t n = stubs_.size();
    std::vector<InfoTag> tags(n);
    for (size_t i = 0; i < n; ++i) {
      tags[i].context.set_deadline(DeadlineIn(deadline_ms));
      tags[i].context.set_wait_for_ready(wait_for_ready);
      tags[i].reader =
          stubs_[i]->AsyncInfo(&tags[i].context, v1::InfoRequest(), &cq_);
      tags[i].reader->Finish(&tags[i].response, &tags[i].status, &tags[i]);
    }
    for (size_t left = n; left > 0;) {
      void* tag = nullptr;
      bool ok = false;
      if (!cq_.Next(&tag, &ok)) break;
      Tag* t = static_cast<Tag*>(tag);
      if (t->kind == Tag::kPrefetch) {
        OnPrefetchDone(static_cast<PrefetchTag*>(t));
        continue;
      }
      --left;
    }
    std::vector<absl::StatusOr<v1::InfoResponse>> out;
    for (size_t i = 0; i < n; ++i) {
      grpc::Status why = tags[i].status;
      if (why.ok()) {
        out.push_back(std::move(tags[i].response));
        continue;
      }
      if (wait_for_ready &&
          why.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
        // A wait-for-ready call only says "deadline exceeded"; one
        // fail-fast call reports the connection's real last error.
        grpc::ClientContext context;
        context.set_deadline(DeadlineIn(1000));
        v1::InfoResponse unused;
        const grpc::Status fast =
            stubs_[i]->Info(&context, v1::InfoRequest(), &unused);
        if (!fast.ok()) why = fast;
      }
      out.push_back(transport::FromGrpcStatus(why));
    }
    return out;
  }

  absl::StatusOr<v1::InfoResponse> Info(int w, int deadline_ms) override {
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(deadline_ms));
    v1::InfoResponse info;
    const grpc::Status status =
        stubs_[w]->Info(&context, v1::InfoRequest(), &info);
    if (!status.ok()) return transport::FromGrpcStatus(status);
    return info;
  }

  void StartCompute(ComputeCall* call, int deadline_ms) override {
    auto t = std::make_unique<ComputeTag>();
    t->kind = Tag::kCompute;
    t->call = call;
    t->context.set_deadline(DeadlineIn(deadline_ms));
    call->sent = RemoteClock::now();
    t->reader =
        stubs_[call->worker]->AsyncCompute(&t->context, call->request, &cq_);
    t->reader->Finish(&call->response, &t->status, t.get());
    computes_.push_back(std::move(t));
  }

  void AwaitComputes() override {
    for (size_t left = computes_.size(); left > 0;) {
      void* tag = nullptr;
      bool ok = false;
      if (!cq_.Next(&tag, &ok)) break;
      Tag* t = static_cast<Tag*>(tag);
      if (t->kind == Tag::kPrefetch) {  // counted, not waited for
        OnPrefetchDone(static_cast<PrefetchTag*>(t));
        continue;
      }
      ComputeTag* c = static_cast<ComputeTag*>(t);
      c->call->answered = RemoteClock::now();
      c->call->status = transport::FromGrpcStatus(c->status);
      --left;
    }
    computes_.clear();
  }

  void SendPrefetch(int w, const v1::PrefetchRequest& request,
                    int deadline_ms) override {
    auto tag = std::make_unique<PrefetchTag>();
    tag->kind = Tag::kPrefetch;
    tag->request = request;
    tag->context.set_deadline(DeadlineIn(deadline_ms));
    // Sent now (gRPC writes it from this thread); the answer is read off
    // the queue by a later wait, never waited for.
    tag->reader = stubs_[w]->AsyncPrefetch(&tag->context, tag->request, &cq_);
    tag->reader->Finish(&tag->response, &tag->status, tag.get());
    PrefetchTag* raw = tag.get();
    prefetches_[raw] = std::move(tag);
  }

  PrefetchTally Prefetches() override {
    while (!prefetches_.empty()) {
      void* tag = nullptr;
      bool ok = false;
      // A deadline in the past: only what has already completed. Between
      // layers only hints are in flight.
      if (cq_.AsyncNext(&tag, &ok, gpr_time_0(GPR_CLOCK_MONOTONIC)) !=
          grpc::CompletionQueue::GOT_EVENT) {
        break;
      }
      OnPrefetchDone(static_cast<PrefetchTag*>(static_cast<Tag*>(tag)));
    }
    tally_.in_flight = prefetches_.size();
    return tally_;
  }

 private:
  void OnPrefetchDone(PrefetchTag* tag) {
    if (tag->status.ok()) {
      tally_.scheduled += tag->response.experts_scheduled();
    } else {
      ++tally_.failed;
    }
    prefetches_.erase(tag);
  }

  std::vector<std::unique_ptr<v1::ExpertService::Stub>> stubs_;
  grpc::CompletionQueue cq_;
  std::vector<std::unique_ptr<ComputeTag>> computes_;  // started, not awaited
  std::map<PrefetchTag*, std::unique_ptr<PrefetchTag>> prefetches_;
  PrefetchTally tally_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerTransport>> MakeGrpcTransport(
    const std::vector<std::string>& addresses, const transport::TlsFiles& tls) {
  // Every layer allocates and frees call buffers; reuse them (transport.h).
  transport::KeepFreedMessageMemory();
  transport::DisableMutexDeadlockDetection();
  FLOTILLA_ASSIGN_OR_RETURN(auto credentials,
                            transport::MakeChannelCredentials(tls));
  std::vector<std::unique_ptr<v1::ExpertService::Stub>> stubs;
  for (const std::string& address : addresses) {
    stubs.push_back(v1::ExpertService::NewStub(transport::NewChannel(
        address, credentials, transport::ChannelOptions())));
  }
  return std::unique_ptr<WorkerTransport>(new GrpcTransport(std::move(stubs)));
}

}  // namespace flotilla::coordinator
