// The coordinator's Prometheus metrics while serving: requests, tokens,
// time to first token and between tokens, batch sizes, the queue, prefix
// reuse (the engine's own reads and RPCs: EngineMetrics). Names follow
// flotilla_<component>_<what>_<unit>; every label has a fixed, small set
// of values (api: completions, chat, grpc; status: the HTTP code).
//
// Thread-safe: the HTTP and gRPC threads report requests, the queue's
// thread reports steps.
#ifndef FLOTILLA_COORDINATOR_SERVE_SERVE_METRICS_H_
#define FLOTILLA_COORDINATOR_SERVE_SERVE_METRICS_H_

#include <cstddef>
#include <string>

#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace flotilla::coordinator::serve {

class ServeMetrics {
 public:
  explicit ServeMetrics(prometheus::Registry& registry);

  // A request answered: its API ("completions", "chat", "grpc"), the HTTP
  // status (gRPC: 200 or the mapped code), its token counts and times (0
  // when it produced no token).
  void RequestDone(const std::string& api, int status, size_t prompt_tokens,
                   size_t completion_tokens, double ttft_seconds,
                   double total_seconds);
  // Time between two tokens of one sequence.
  void InterToken(double seconds);
  // One forward step of the queue: sequences in it, tokens it produced, and
  // the jobs waiting and running after it.
  void Step(size_t sequences, size_t tokens, size_t waiting, size_t running);
  // The batch emptied without a step (its last requests were cancelled or
  // timed out): the gauges, no step counted.
  void Idle(size_t waiting);
  void PrefixHit(size_t reused_tokens);
  // A speculative pass (serve --speculate): guesses checked and kept.
  void Speculated(size_t drafted, size_t accepted);

 private:
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Counter& prompt_tokens_;
  prometheus::Counter& generated_tokens_;
  prometheus::Histogram& ttft_;
  prometheus::Histogram& request_seconds_;
  prometheus::Histogram& inter_token_;
  prometheus::Histogram& batch_size_;
  prometheus::Counter& steps_;
  prometheus::Gauge& waiting_;
  prometheus::Gauge& running_;
  prometheus::Counter& prefix_hits_;
  prometheus::Counter& prefix_tokens_;
  prometheus::Counter& speculative_passes_;
  prometheus::Counter& drafted_tokens_;
  prometheus::Counter& accepted_tokens_;
};

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_SERVE_METRICS_H_
