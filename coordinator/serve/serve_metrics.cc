#include "coordinator/serve/serve_metrics.h"

#include <string>

#include "shared/metrics/metrics_server.h"

namespace flotilla::coordinator::serve {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::Histogram;

// Seconds from 5 ms to 10 minutes: a token on a small model in memory to a
// long prompt on a streamed 2.78T model.
Histogram::BucketBoundaries SecondsBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
          2.5,   5,    10,    30,   60,  120,  300, 600};
}

using metrics::AddCounter;
using metrics::AddHistogram;

}  // namespace

ServeMetrics::ServeMetrics(prometheus::Registry& r)
    : requests_(BuildCounter()
                    .Name("flotilla_serve_requests_total")
                    .Help("Requests answered, by API and HTTP status")
                    .Register(r)),
      prompt_tokens_(AddCounter(r, "flotilla_serve_prompt_tokens_total",
                                "Prompt tokens of answered requests")),
      generated_tokens_(AddCounter(r, "flotilla_serve_generated_tokens_total",
                                   "Tokens generated")),
      ttft_(AddHistogram(r, "flotilla_serve_time_to_first_token_seconds",
                         "From a request's arrival to its first token",
                         SecondsBuckets())),
      request_seconds_(AddHistogram(
          r, "flotilla_serve_request_duration_seconds",
          "From a request's arrival to its end", SecondsBuckets())),
      inter_token_(AddHistogram(r, "flotilla_serve_inter_token_latency_seconds",
                                "Between two tokens of one sequence",
                                SecondsBuckets())),
      batch_size_(AddHistogram(r, "flotilla_serve_batch_sequences",
                               "Sequences stepped together per forward pass",
                               {1, 2, 4, 8, 16, 32, 64, 128})),
      steps_(AddCounter(r, "flotilla_serve_steps_total", "Forward steps run")),
      waiting_(BuildGauge()
                   .Name("flotilla_serve_queue_waiting")
                   .Help("Requests waiting for a batch slot")
                   .Register(r)
                   .Add({})),
      running_(BuildGauge()
                   .Name("flotilla_serve_running_sequences")
                   .Help("Sequences in the batch")
                   .Register(r)
                   .Add({})),
      prefix_hits_(AddCounter(r, "flotilla_serve_prefix_cache_hits_total",
                              "Requests that resumed from a kept state")),
      prefix_tokens_(
          AddCounter(r, "flotilla_serve_prefix_reused_tokens_total",
                     "Prompt tokens not prefilled thanks to reuse")),
      speculative_passes_(
          AddCounter(r, "flotilla_serve_speculative_passes_total",
                     "Forward passes that checked drafted tokens")),
      drafted_tokens_(AddCounter(r, "flotilla_serve_drafted_tokens_total",
                                 "Drafted tokens checked")),
      accepted_tokens_(AddCounter(r, "flotilla_serve_accepted_tokens_total",
                                  "Drafted tokens kept")) {}

void ServeMetrics::RequestDone(const std::string& api, int status,
                               size_t prompt_tokens, size_t completion_tokens,
                               double ttft_seconds, double total_seconds) {
  requests_.Add({{"api", api}, {"status", std::to_string(status)}}).Increment();
  prompt_tokens_.Increment(static_cast<double>(prompt_tokens));
  if (completion_tokens > 0) ttft_.Observe(ttft_seconds);
  request_seconds_.Observe(total_seconds);
}

void ServeMetrics::InterToken(double seconds) { inter_token_.Observe(seconds); }

void ServeMetrics::Step(size_t sequences, size_t tokens, size_t waiting,
                        size_t running) {
  steps_.Increment();
  batch_size_.Observe(static_cast<double>(sequences));
  generated_tokens_.Increment(static_cast<double>(tokens));
  waiting_.Set(static_cast<double>(waiting));
  running_.Set(static_cast<double>(running));
}

void ServeMetrics::Idle(size_t waiting) {
  waiting_.Set(static_cast<double>(waiting));
  running_.Set(0);
}

void ServeMetrics::Speculated(size_t drafted, size_t accepted) {
  speculative_passes_.Increment();
  drafted_tokens_.Increment(static_cast<double>(drafted));
  accepted_tokens_.Increment(static_cast<double>(accepted));
}

void ServeMetrics::PrefixHit(size_t reused_tokens) {
  prefix_hits_.Increment();
  prefix_tokens_.Increment(static_cast<double>(reused_tokens));
}

}  // namespace flotilla::coordinator::serve
