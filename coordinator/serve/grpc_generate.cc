#include "coordinator/serve/grpc_generate.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "coordinator/serve/completion_job.h"
#include "shared/tokenizer/utf8.h"
#include "shared/transport/transport.h"

namespace flotilla::coordinator::serve {
namespace {

grpc::Status Invalid(const std::string& message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message);
}

}  // namespace

GenerationService::GenerationService(LanguageModel* model,
                                     const tokenizer::Tokenizer* tokenizer,
                                     GenerationQueue* queue,
                                     RequestLimits limits,
                                     ServeMetrics* metrics)
    : model_(model),
      tokenizer_(tokenizer),
      queue_(queue),
      limits_(limits),
      metrics_(metrics) {
  // As the generated Generation::Service registers it, but with the
  // request's bytes left to Generate.
  AddMethod(new grpc::internal::RpcServiceMethod(
      "/flotilla.v1.Generation/Generate",
      grpc::internal::RpcMethod::SERVER_STREAMING,
      new grpc::internal::ServerStreamingHandler<
          GenerationService, grpc::ByteBuffer, flotilla::v1::GenerateResponse>(
          [](GenerationService* service, grpc::ServerContext* context,
             const grpc::ByteBuffer* request,
             grpc::ServerWriter<flotilla::v1::GenerateResponse>* writer) {
            return service->Generate(context, request, writer);
          },
          this)));
}

grpc::Status GenerationService::Generate(
    grpc::ServerContext* context, const grpc::ByteBuffer* bytes,
    grpc::ServerWriter<flotilla::v1::GenerateResponse>* writer) {
  const absl::Time start = absl::Now();
  std::shared_ptr<Completion> c;
  flotilla::v1::GenerateRequest request;
  grpc::Slice slice;
  grpc::Status status;
  if (!bytes->TrySingleSlice(&slice).ok() &&
      !bytes->DumpToSingleSlice(&slice).ok()) {
    status = Invalid("the request could not be read");
  } else if (!request.ParseFromArray(slice.begin(),
                                     static_cast<int>(slice.size()))) {
    status = Invalid(
        "the request is not a flotilla.v1.GenerateRequest (it does not "
        "parse as one)");
  } else {
    status = Run(context, &request, writer, &c);
  }
  if (metrics_ != nullptr) {
    // The HTTP status the gRPC code corresponds to, so both APIs share
    // one requests_total family.
    int http = 500;
    switch (status.error_code()) {
      case grpc::StatusCode::OK:
        http = 200;
        break;
      case grpc::StatusCode::INVALID_ARGUMENT:
        http = 400;
        break;
      case grpc::StatusCode::RESOURCE_EXHAUSTED:
        http = 429;
        break;
      case grpc::StatusCode::UNAVAILABLE:
        http = 503;
        break;
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        http = 504;
        break;
      case grpc::StatusCode::CANCELLED:
        http = 499;
        break;
      default:
        break;
    }
    metrics_->RequestDone("grpc", http, c ? c->prompt_tokens() : 0,
                          c ? c->completion_tokens() : 0,
                          c ? c->ttft_seconds() : 0,
                          absl::ToDoubleSeconds(absl::Now() - start));
  }
  return status;
}

grpc::Status GenerationService::Run(
    grpc::ServerContext* context, const flotilla::v1::GenerateRequest* r,
    grpc::ServerWriter<flotilla::v1::GenerateResponse>* writer,
    std::shared_ptr<Completion>* completion) {
  CompletionSpec spec;
  // bytes on the wire (generate.proto): UTF-8 is checked here.
  if (!tokenizer::IsValidUtf8(r->prompt())) {
    return Invalid("prompt is not valid UTF-8");
  }
  for (int i = 0; i < r->stop_size(); ++i) {
    if (!tokenizer::IsValidUtf8(r->stop(i))) {
      return Invalid(absl::StrCat("stop[", i, "] is not valid UTF-8"));
    }
  }
  if (r->prompt_ids_size() > 0) {
    spec.prompt.assign(r->prompt_ids().begin(), r->prompt_ids().end());
  } else {
    if (tokenizer_ == nullptr) {
      return Invalid("this model has no tokenizer: send prompt_ids");
    }
    if (r->prompt().size() > limits_.max_prompt_bytes) {
      return Invalid(absl::StrCat("prompt is ", r->prompt().size(),
                                  " bytes; the limit is ",
                                  limits_.max_prompt_bytes));
    }
    spec.prompt = tokenizer_->Encode(r->prompt());
  }
  spec.max_tokens =
      r->max_tokens() == 0 ? limits_.default_max_tokens : r->max_tokens();
  spec.max_tokens_given = r->max_tokens() != 0;
  FitDefaultMaxTokens(&spec, limits_);
  if (absl::Status st =
          CheckCompletionSpec(spec, model_->vocab_size(), limits_);
      !st.ok()) {
    return Invalid(std::string(st.message()));
  }
  spec.sampler.temperature = r->temperature();
  spec.sampler.top_p = r->top_p() == 0 ? 1.0f : r->top_p();
  spec.sampler.top_k = r->top_k();
  spec.sampler.seed = r->seed();
  if (absl::Status s = ValidateSamplerOptions(spec.sampler); !s.ok()) {
    return Invalid(std::string(s.message()));
  }
  spec.stop.assign(r->stop().begin(), r->stop().end());
  for (const std::string& s : spec.stop) {
    if (s.empty()) return Invalid("stop: an empty stop string");
  }
  spec.stop_ids.assign(r->stop_ids().begin(), r->stop_ids().end());
  // The server's limit, or the client's own deadline when sooner (then
  // the error says whose deadline passed).
  spec.timeout = limits_.request_timeout;
  const absl::Time deadline = absl::FromChrono(context->deadline());
  const bool clients_deadline = deadline < absl::Now() + spec.timeout;
  if (clients_deadline) {
    spec.timeout = deadline - absl::Now();
    spec.timeout_is_a_length = false;
  }
  auto started =
      Completion::Start(queue_, tokenizer_, std::move(spec), metrics_);
  if (!started.ok()) return transport::ToGrpcStatus(started.status());
  std::shared_ptr<Completion> c = *std::move(started);
  *completion = c;
  CompletionPiece piece;
  for (bool done = false; !done;) {
    done = c->Take(&piece);
    flotilla::v1::GenerateResponse out;
    out.mutable_token_ids()->Add(piece.ids.begin(), piece.ids.end());
    out.set_text(tokenizer::ToValidUtf8(piece.text));
    out.set_raw_text(piece.text);
    if (done) {
      if (clients_deadline && absl::IsDeadlineExceeded(c->status())) {
        return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                            "the call's deadline (set by the client) passed "
                            "before the generation ended");
      }
      if (!c->status().ok()) return transport::ToGrpcStatus(c->status());
      out.set_finish_reason(c->finish_reason());
      out.set_prompt_tokens(static_cast<int32_t>(c->prompt_tokens()));
      out.set_completion_tokens(static_cast<int32_t>(c->completion_tokens()));
    }
    if (context->IsCancelled() || !writer->Write(out)) {
      c->Cancel();
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
    }
  }
  return grpc::Status::OK;
}

}  // namespace flotilla::coordinator::serve
