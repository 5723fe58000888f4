// The engine's Prometheus metrics, shared by `serve` and `generate`
// (--metrics-port): bytes read by source and phase, per token and in total,
// read latency and the reader's busy time (achieved bandwidth), time blocked
// on reads against time in the forward pass, expert activations per layer,
// cache and prefetch hits, the expert workers' RPCs (latency by worker and
// method, failures, retries, failovers, which workers are up) and memory by
// owner against the budget.
//
// The engine keeps plain cumulative counters (RunCounters); Step turns the
// increase since the previous call into metric increments, so /metrics
// always equals what --stats computes from the same counters: the bytes of
// the steps that fed no prompt token (phase="decode") over the tokens those
// steps produced are --stats' bytes per decoded token.
//
// Labels, all bounded: source (trunk, embedding, lm_head, experts), phase
// (prefill, decode), layer (the model's MoE layers), worker (the --workers
// addresses), method (Compute, Info).
//
// Thread-compatible: call Step from the thread that runs the forward pass.
#ifndef FLOTILLA_COORDINATOR_ENGINE_METRICS_H_
#define FLOTILLA_COORDINATOR_ENGINE_METRICS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/run_report.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace flotilla::coordinator {

class EngineMetrics {
 public:
  explicit EngineMetrics(prometheus::Registry& registry);

  // After one forward step: the engine's counters now, the prompt tokens
  // it fed (0: a decode step), the tokens it generated and its wall time.
  // tokens_total counts a prefill step's prompt tokens and a decode step's
  // generated ones; steps, seconds and bytes go under the step's phase.
  void Step(const RunCounters& now, size_t prompt_tokens,
            size_t generated_tokens, double seconds);
  // The counters before the first step: what opening the model read (the
  // resident experts, pinned layers) is not a step's.
  void Baseline(const RunCounters& now) { last_ = now; }

  // Memory charged to the budget by owner, and the budget (--mem), as the
  // engine's plan charged them at open (nothing without a budget).
  void Memory(const Engine& engine);

 private:
  void AddRemote(const RemoteStats& now);

  prometheus::Family<prometheus::Counter>& read_bytes_;
  prometheus::Family<prometheus::Histogram>& bytes_per_token_;
  prometheus::Family<prometheus::Counter>& tokens_;
  prometheus::Family<prometheus::Counter>& steps_;
  prometheus::Family<prometheus::Counter>& forward_seconds_;
  prometheus::Family<prometheus::Counter>& io_wait_;
  prometheus::Counter& trunk_read_busy_;
  prometheus::Histogram& region_latency_;
  prometheus::Histogram& expert_read_latency_;
  prometheus::Counter& expert_reads_;
  prometheus::Counter& experts_used_;
  prometheus::Counter& cache_hits_;
  prometheus::Counter& prefetch_hits_;
  prometheus::Counter& expert_compute_;
  prometheus::Family<prometheus::Counter>& routed_;
  prometheus::Family<prometheus::Histogram>& rpc_seconds_;
  prometheus::Family<prometheus::Counter>& rpc_failures_;
  prometheus::Counter& rpc_retries_;
  prometheus::Family<prometheus::Counter>& rpc_bytes_;
  prometheus::Family<prometheus::Counter>& failovers_;
  prometheus::Family<prometheus::Counter>& hints_;
  prometheus::Family<prometheus::Gauge>& worker_up_;
  prometheus::Family<prometheus::Gauge>& memory_;
  prometheus::Gauge& budget_;

  RunCounters last_;
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_ENGINE_METRICS_H_
