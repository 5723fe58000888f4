// flotilla.v1.Generation/Generate over the same GenerationQueue as the HTTP
// API (proto/flotilla/v1/generate.proto).
#ifndef FLOTILLA_COORDINATOR_SERVE_GRPC_GENERATE_H_
#define FLOTILLA_COORDINATOR_SERVE_GRPC_GENERATE_H_

#include "coordinator/model/language_model.h"
#include "coordinator/serve/completion_job.h"
#include "coordinator/serve/completion_request.h"
#include "coordinator/serve/generation_queue.h"
#include "coordinator/serve/serve_metrics.h"
#include "flotilla/v1/generate.grpc.pb.h"
#include "shared/tokenizer/tokenizer.h"

namespace flotilla::coordinator::serve {

class GenerationService final : public flotilla::v1::Generation::Service {
 public:
  // Everything must outlive the service.
  GenerationService(LanguageModel* model, const tokenizer::Tokenizer* tokenizer,
                    GenerationQueue* queue, RequestLimits limits,
                    ServeMetrics* metrics = nullptr)
      : model_(model),
        tokenizer_(tokenizer),
        queue_(queue),
        limits_(limits),
        metrics_(metrics) {}

  grpc::Status Generate(
      grpc::ServerContext* context,
      const flotilla::v1::GenerateRequest* request,
      grpc::ServerWriter<flotilla::v1::GenerateResponse>* writer) override;

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
