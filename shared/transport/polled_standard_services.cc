#include "shared/transport/polled_standard_services.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "shared/transport/reflection_answers.h"

namespace flotilla::transport {

class GenericCall;

struct PolledStandardServices::State {
  std::vector<std::string> services;  // own ones, then health, reflection
  bool serving = true;
  grpc::AsyncGenericService* generic = nullptr;
  grpc::ServerCompletionQueue* cq = nullptr;
  std::set<GenericCall*> watchers;  // open Watch streams
};

namespace {

// Open Watch streams a server keeps; more are refused. A client that goes
// away is noticed only at the next status change (shutdown), so this bounds
// what abandoned streams can hold.
constexpr size_t kMaxWatchers = 64;

// grpc.health.v1.HealthCheckResponse.ServingStatus
constexpr uint64_t kServing = 1, kNotServing = 2, kServiceUnknown = 3;

enum class Method { kUnknown, kCheck, kWatch, kReflection };

Method Classify(const std::string& method) {
  if (method == absl::StrCat("/", kHealthService, "/Check")) {
    return Method::kCheck;
  }
  if (method == absl::StrCat("/", kHealthService, "/Watch")) {
    return Method::kWatch;
  }
  if (method ==
          absl::StrCat("/", kReflectionV1Alpha, "/ServerReflectionInfo") ||
      method == absl::StrCat("/", kReflectionV1, "/ServerReflectionInfo")) {
    return Method::kReflection;
  }
  return Method::kUnknown;
}

grpc::ByteBuffer ToBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

bool Flatten(const grpc::ByteBuffer& buffer, std::string* bytes) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return false;
  bytes->clear();
  for (const grpc::Slice& s : slices) {
    bytes->append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return true;
}

}  // namespace

// One call of a method the server does not register itself: health,
// reflection, or an unknown method (UNIMPLEMENTED, as gRPC would answer).
class GenericCall final : public PolledOp {
 public:
  using State = PolledStandardServices::State;

  static void Await(const std::shared_ptr<State>& state) {
    auto* call = new GenericCall(state);
    state->generic->RequestCall(&call->context_, &call->stream_, state->cq,
                                state->cq, call);
  }

  bool Proceed(bool ok) override {
    switch (step_) {
      case Step::kArrive:
        if (!ok) return false;  // the server is shutting down
        Await(state_);
        method_ = Classify(context_.method());
        if (method_ == Method::kUnknown) {
          Finish(
              grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                           absl::StrCat("unknown method ", context_.method())));
        } else {
          Read();
        }
        return true;
      case Step::kRead:
        if (!ok) {  // the client closed its side (or went away)
          Finish(method_ == Method::kReflection
                     ? grpc::Status::OK
                     : grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                    "no request message"));
          return true;
        }
        OnRequest();
        return true;
      case Step::kWrite:
        if (!ok) {  // the stream broke; the client is gone
          Finish(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
        } else if (method_ == Method::kReflection) {
          Read();
        } else if (const std::string now = HealthAnswer(watched_);
                   now != written_) {  // Watch: it changed during the write
          Write(now);
        } else if (!state_->serving) {  // Watch: the last status was sent
          Finish(grpc::Status::OK);
        } else {
          step_ = Step::kIdle;  // Watch: until the status changes
        }
        return true;
      case Step::kIdle:  // no operation pending, so no event comes here
        return true;
      case Step::kFinish:
        return false;
    }
    return false;
  }

  // Watch streams: send the new status (the polling thread only). A
  // stream idle at a shutdown that skipped SetNotServing gets no event
  // after gRPC cancels it, and stays allocated until the process ends.
  void StatusChanged() {
    if (step_ != Step::kIdle) return;  // a write is in flight; its end sends
    Write(HealthAnswer(watched_));
  }

  ~GenericCall() override { state_->watchers.erase(this); }

 private:
  enum class Step { kArrive, kRead, kWrite, kIdle, kFinish };

  explicit GenericCall(std::shared_ptr<State> state)
      : state_(std::move(state)), stream_(&context_) {}

  void Read() {
    step_ = Step::kRead;
    stream_.Read(&in_, this);
  }
  void Write(const std::string& bytes) {
    step_ = Step::kWrite;
    written_ = bytes;
    out_ = ToBuffer(bytes);
    stream_.Write(out_, this);
  }
  void Finish(const grpc::Status& status) {
    step_ = Step::kFinish;
    state_->watchers.erase(this);
    stream_.Finish(status, this);
  }

  // ServingStatus of `service` ("": the whole server).
  uint64_t HealthStatus(const std::string& service) const {
    if (service.empty() ||
        std::find(state_->services.begin(), state_->services.end(), service) !=
            state_->services.end()) {
      return state_->serving ? kServing : kNotServing;
    }
    return kServiceUnknown;
  }

  // HealthCheckResponse{status} for `service`.
  std::string HealthAnswer(const std::string& service) const {
    std::string bytes;
    AppendVarint(1, HealthStatus(service), &bytes);
    return bytes;
  }

  void OnRequest() {
    std::string request;
    if (!Flatten(in_, &request)) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "unreadable request"));
      return;
    }
    if (method_ == Method::kReflection) {
      Write(AnswerReflectionRequest(request, state_->services, &sent_));
      return;
    }
    // HealthCheckRequest{string service = 1}
    std::vector<WireField> fields;
    if (!ReadFields(request, &fields)) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "unreadable HealthCheckRequest"));
      return;
    }
    std::string service;
    for (const WireField& f : fields) {
      if (f.number == 1 && f.length_delimited) service = std::string(f.bytes);
    }
    if (method_ == Method::kCheck) {
      if (HealthStatus(service) == kServiceUnknown) {
        // Check's contract: NOT_FOUND, no message.
        Finish(grpc::Status(grpc::StatusCode::NOT_FOUND,
                            absl::StrCat("unknown service ", service)));
        return;
      }
      step_ = Step::kFinish;
      out_ = ToBuffer(HealthAnswer(service));
      stream_.WriteAndFinish(out_, grpc::WriteOptions(), grpc::Status::OK,
                             this);
      return;
    }
    if (state_->watchers.size() >= kMaxWatchers) {
      Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          absl::StrCat("more than ", kMaxWatchers,
                                       " health Watch streams open")));
      return;
    }
    watched_ = service;
    state_->watchers.insert(this);
    Write(HealthAnswer(service));
  }

  const std::shared_ptr<State> state_;
  grpc::GenericServerContext context_;
  grpc::GenericServerAsyncReaderWriter stream_;
  grpc::ByteBuffer in_, out_;
  Step step_ = Step::kArrive;
  Method method_ = Method::kUnknown;
  std::string watched_;         // Watch: the service asked about
  std::string written_;         // the last message written
  std::set<std::string> sent_;  // reflection: files sent on this stream
};

PolledStandardServices::PolledStandardServices(
    std::vector<std::string> services)
    : state_(std::make_shared<State>()) {
  state_->services = std::move(services);
  for (const char* s : {kHealthService, kReflectionV1Alpha, kReflectionV1}) {
    state_->services.emplace_back(s);
  }
  state_->generic = &generic_;
}

void PolledStandardServices::Start(grpc::ServerCompletionQueue* cq) {
  state_->cq = cq;
  GenericCall::Await(state_);
}

void PolledStandardServices::SetNotServing() {
  if (!state_->serving) return;
  state_->serving = false;
  // StatusChanged may finish a stream, which leaves the set: iterate a copy.
  const std::set<GenericCall*> watchers = state_->watchers;
  for (GenericCall* w : watchers) w->StatusChanged();
}

}  // namespace flotilla::transport
