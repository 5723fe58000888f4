// The coordinator's Prometheus metrics while serving: requests, tokens,
// time to first token and between tokens, batch sizes, the queue, prefix
// reuse, and the engine's reads per token by source. Names follow
// flotilla_<component>_<what>_<unit>; every label has a fixed, small set
// of values (api: completions, chat, grpc; status: the HTTP code; source:
// trunk, experts).
//
// Thread-safe: the HTTP and gRPC threads report requests, the queue's
// thread reports steps and engine counters (it owns the model, so the
// engine's own counters are read only there).
#ifndef FLOTILLA_COORDINATOR_SERVE_SERVE_METRICS_H_
#define FLOTILLA_COORDINATOR_SERVE_SERVE_METRICS_H_

#include <cstddef>
#include <mutex>
#include <string>

#include "coordinator/run_report.h"
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
  void PrefixHit(size_t reused_tokens);
  // The engine's counters after a step (queue thread): the increase since
  // the last call is added to the totals, and per generated token to the
  // per-token histograms.
  void EngineCounters(const RunCounters& now, size_t tokens);
  // Memory charged to the budget by owner (set once at start).
  void MemoryOwner(const std::string& owner, uint64_t bytes);
  void MemoryBudget(uint64_t bytes);

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
  prometheus::Counter& trunk_bytes_;
  prometheus::Counter& expert_bytes_;
  prometheus::Histogram& trunk_bytes_per_token_;
  prometheus::Histogram& expert_bytes_per_token_;
  prometheus::Counter& expert_reads_;
  prometheus::Counter& experts_used_;
  prometheus::Counter& expert_cache_hits_;
  prometheus::Counter& expert_prefetch_hits_;
  prometheus::Counter& trunk_wait_;
  prometheus::Counter& expert_wait_;
  prometheus::Counter& expert_compute_;
  prometheus::Family<prometheus::Gauge>& memory_;
  prometheus::Gauge& budget_;

  std::mutex mu_;
  RunCounters last_;  // guarded by mu_
};

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_SERVE_METRICS_H_
