#include "coordinator/serve/serve_metrics.h"

#include <string>

#include "shared/metrics/metrics_server.h"

namespace flotilla::coordinator::serve {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

// Seconds from 5 ms to 10 minutes: a token on a small model in memory to a
// long prompt on a streamed 2.78T model.
Histogram::BucketBoundaries SecondsBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
          2.5,   5,    10,    30,   60,  120,  300, 600};
}

// Bytes per token from 1 MB to 64 GB, by powers of 4.
Histogram::BucketBoundaries BytesBuckets() {
  Histogram::BucketBoundaries b;
  for (double v = 1 << 20; v <= 64.0 * (1ull << 30); v *= 4) b.push_back(v);
  return b;
}

using metrics::AddCounter;

Histogram& Hist(prometheus::Registry& r, const std::string& name,
                const std::string& help, Histogram::BucketBoundaries b,
                const prometheus::Labels& labels = {}) {
  return BuildHistogram().Name(name).Help(help).Register(r).Add(labels,
                                                                std::move(b));
}

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
      ttft_(Hist(r, "flotilla_serve_time_to_first_token_seconds",
                 "From a request's arrival to its first token",
                 SecondsBuckets())),
      request_seconds_(Hist(r, "flotilla_serve_request_duration_seconds",
                            "From a request's arrival to its end",
                            SecondsBuckets())),
      inter_token_(Hist(r, "flotilla_serve_inter_token_latency_seconds",
                        "Between two tokens of one sequence",
                        SecondsBuckets())),
      batch_size_(Hist(r, "flotilla_serve_batch_sequences",
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
      prefix_tokens_(AddCounter(r, "flotilla_serve_prefix_reused_tokens_total",
                                "Prompt tokens not prefilled thanks to reuse")),
      trunk_bytes_(AddCounter(r, "flotilla_coordinator_read_bytes_total",
                              "Bytes read from disk, by source",
                              {{"source", "trunk"}})),
      expert_bytes_(AddCounter(r, "flotilla_coordinator_read_bytes_total",
                               "Bytes read from disk, by source",
                               {{"source", "experts"}})),
      trunk_bytes_per_token_(
          Hist(r, "flotilla_coordinator_read_bytes_per_token",
               "Bytes read per generated token, by source (one observation "
               "per step: the step's reads over its tokens)",
               BytesBuckets(), {{"source", "trunk"}})),
      expert_bytes_per_token_(
          Hist(r, "flotilla_coordinator_read_bytes_per_token",
               "Bytes read per generated token, by source (one observation "
               "per step: the step's reads over its tokens)",
               BytesBuckets(), {{"source", "experts"}})),
      expert_reads_(AddCounter(r, "flotilla_coordinator_expert_reads_total",
                               "Expert runs read from disk")),
      experts_used_(AddCounter(r,
                               "flotilla_coordinator_expert_activations_total",
                               "Distinct experts computed, summed per layer")),
      expert_cache_hits_(
          AddCounter(r, "flotilla_coordinator_expert_cache_hits_total",
                     "Experts served from the resident cache")),
      expert_prefetch_hits_(
          AddCounter(r, "flotilla_coordinator_expert_prefetch_hits_total",
                     "Experts served from a lookahead prefetch")),
      trunk_wait_(AddCounter(r, "flotilla_coordinator_io_wait_seconds_total",
                             "Forward pass blocked on reads, by source",
                             {{"source", "trunk"}})),
      expert_wait_(AddCounter(r, "flotilla_coordinator_io_wait_seconds_total",
                              "Forward pass blocked on reads, by source",
                              {{"source", "experts"}})),
      expert_compute_(
          AddCounter(r, "flotilla_coordinator_expert_compute_seconds_total",
                     "Time computing routed experts")),
      memory_(BuildGauge()
                  .Name("flotilla_coordinator_memory_charged_bytes")
                  .Help("Memory charged to the budget, by owner")
                  .Register(r)),
      budget_(BuildGauge()
                  .Name("flotilla_coordinator_memory_budget_bytes")
                  .Help("The memory budget (--mem)")
                  .Register(r)
                  .Add({})) {}

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

void ServeMetrics::PrefixHit(size_t reused_tokens) {
  prefix_hits_.Increment();
  prefix_tokens_.Increment(static_cast<double>(reused_tokens));
}

void ServeMetrics::EngineCounters(const RunCounters& now, size_t tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  const double trunk = now.trunk.bytes_read - last_.trunk.bytes_read;
  const double experts = now.experts.bytes_read - last_.experts.bytes_read;
  trunk_bytes_.Increment(trunk);
  expert_bytes_.Increment(experts);
  if (tokens > 0) {
    trunk_bytes_per_token_.Observe(trunk / tokens);
    expert_bytes_per_token_.Observe(experts / tokens);
  }
  expert_reads_.Increment(now.experts.experts_read -
                          last_.experts.experts_read);
  experts_used_.Increment(now.experts.experts_used -
                          last_.experts.experts_used);
  expert_cache_hits_.Increment(now.experts.cache_hits -
                               last_.experts.cache_hits);
  expert_prefetch_hits_.Increment(now.experts.prefetch_hits -
                                  last_.experts.prefetch_hits);
  trunk_wait_.Increment(now.trunk.wait_seconds - last_.trunk.wait_seconds);
  expert_wait_.Increment(now.experts.io_wait_seconds -
                         last_.experts.io_wait_seconds);
  expert_compute_.Increment(now.experts.compute_seconds -
                            last_.experts.compute_seconds);
  last_ = now;
}

void ServeMetrics::MemoryOwner(const std::string& owner, uint64_t bytes) {
  memory_.Add({{"owner", owner}}).Set(static_cast<double>(bytes));
}

void ServeMetrics::MemoryBudget(uint64_t bytes) {
  budget_.Set(static_cast<double>(bytes));
}

}  // namespace flotilla::coordinator::serve
