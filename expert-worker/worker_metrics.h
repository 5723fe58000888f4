// The expert worker's Prometheus metrics: Compute calls by outcome, their
// time in the queue and in all, and what they read and computed (from each
// answer's ComputeStats), Prefetch hints, and the --mem budget. Names
// follow flotilla_worker_<what>_<unit>; the only label, `code`, takes the
// few gRPC codes a call can end with.
//
// Thread-safe (prometheus-cpp metrics): gRPC threads count refusals, the
// compute thread counts the calls it ran.
#ifndef FLOTILLA_EXPERT_WORKER_WORKER_METRICS_H_
#define FLOTILLA_EXPERT_WORKER_WORKER_METRICS_H_

#include <cstdint>
#include <string>

#include "flotilla/v1/expert.pb.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace flotilla::expert_worker {

class WorkerMetrics {
 public:
  explicit WorkerMetrics(prometheus::Registry& registry);

  // A Compute call ended with gRPC status `code` (0 = OK); `stats` is the
  // answer's (null for a call that was refused or failed).
  void ComputeDone(int code, const v1::ComputeStats* stats);
  void PrefetchDone(uint32_t experts_scheduled);
  void MemoryBudget(uint64_t bytes);

 private:
  prometheus::Family<prometheus::Counter>& calls_;
  prometheus::Histogram& call_seconds_;
  prometheus::Histogram& queue_seconds_;
  prometheus::Counter& read_bytes_;
  prometheus::Counter& read_seconds_;
  prometheus::Counter& compute_seconds_;
  prometheus::Counter& experts_computed_;
  prometheus::Counter& cache_hits_;
  prometheus::Counter& prefetch_hits_;
  prometheus::Counter& prefetch_calls_;
  prometheus::Counter& prefetch_scheduled_;
  prometheus::Gauge& budget_;
};

// The label value for a gRPC status code: "ok", "invalid_argument",
// "resource_exhausted", "cancelled", "deadline_exceeded", else "other".
std::string CodeLabel(int code);

}  // namespace flotilla::expert_worker

#endif  // FLOTILLA_EXPERT_WORKER_WORKER_METRICS_H_
