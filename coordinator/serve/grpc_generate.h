// flotilla.v1.Generation/Generate over the same GenerationQueue as the HTTP
// API (proto/flotilla/v1/generate.proto).
//
// The method is registered by hand with the request as raw bytes, and the
// service parses them itself: with the generated handler, gRPC's own
// parser answered a request that is not a GenerateRequest with INTERNAL
// and no message before any Flotilla code ran.
#ifndef FLOTILLA_COORDINATOR_SERVE_GRPC_GENERATE_H_
#define FLOTILLA_COORDINATOR_SERVE_GRPC_GENERATE_H_

#include "coordinator/model/language_model.h"
#include "coordinator/serve/completion_job.h"
#include "coordinator/serve/completion_request.h"
#include "coordinator/serve/generation_queue.h"
#include "coordinator/serve/serve_metrics.h"
#include "flotilla/v1/generate.grpc.pb.h"
#include "grpcpp/impl/codegen/byte_buffer.h"
#include "shared/tokenizer/tokenizer.h"

namespace flotilla::coordinator::serve {

class GenerationService final : public grpc::Service {
 public:
  // Everything must outlive the service.
  GenerationService(LanguageModel* model, const tokenizer::Tokenizer* tokenizer,
                    GenerationQueue* queue, RequestLimits limits,
                    ServeMetrics* metrics = nullptr);

  // INVALID_ARGUMENT when `request` is not a GenerateRequest.
  grpc::Status Generate(
      grpc::ServerContext* context, const grpc::ByteBuffer* request,
      grpc::ServerWriter<flotilla::v1::GenerateResponse>* writer);

 private:
  // Generate without the metrics; *completion is set once one started.
  grpc::Status Run(grpc::ServerContext* context,
                   const flotilla::v1::GenerateRequest* request,
                   grpc::ServerWriter<flotilla::v1::GenerateResponse>* writer,
                   std::shared_ptr<Completion>* completion);

  LanguageModel* model_;
  const tokenizer::Tokenizer* tokenizer_;
  GenerationQueue* queue_;
  RequestLimits limits_;
  ServeMetrics* metrics_;
};

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_GRPC_GENERATE_H_
