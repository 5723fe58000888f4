#include "expert-worker/worker_metrics.h"

#include "shared/metrics/metrics_server.h"

namespace flotilla::expert_worker {
namespace {

using prometheus::BuildCounter;
using prometheus::Histogram;

// 100 us to 10 s: a cached expert on loopback to a layer's worth of reads
// from a slow disk.
Histogram::BucketBoundaries CallBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,   0.1,     0.25,   0.5,   1,      2.5,   10};
}

using metrics::AddCounter;
using metrics::AddHistogram;

}  // namespace

std::string CodeLabel(int code) {
  switch (code) {
    case 0:
      return "ok";
    case 1:
      return "cancelled";
    case 3:
      return "invalid_argument";
    case 4:
      return "deadline_exceeded";
    case 8:
      return "resource_exhausted";
    default:
      return "other";
  }
}

WorkerMetrics::WorkerMetrics(prometheus::Registry& r)
    : calls_(BuildCounter()
                 .Name("flotilla_worker_compute_calls_total")
                 .Help("Compute calls ended, by gRPC code")
                 .Register(r)),
      call_seconds_(AddHistogram(r, "flotilla_worker_compute_call_seconds",
                                 "From a Compute call's arrival to its answer",
                                 CallBuckets())),
      queue_seconds_(AddHistogram(r, "flotilla_worker_compute_queue_seconds",
                                  "Time a Compute call waited for the compute "
                                  "thread",
                                  CallBuckets())),
      read_bytes_(AddCounter(r, "flotilla_worker_read_bytes_total",
                             "Expert bytes read from disk")),
      read_seconds_(
          AddCounter(r, "flotilla_worker_read_seconds_total",
                     "Wall time from a call's first read to its last")),
      compute_seconds_(
          AddCounter(r, "flotilla_worker_expert_compute_seconds_total",
                     "Thread-seconds in expert kernels")),
      experts_computed_(AddCounter(r, "flotilla_worker_experts_computed_total",
                                   "Experts computed")),
      cache_hits_(AddCounter(r, "flotilla_worker_expert_cache_hits_total",
                             "Experts served from memory without a read")),
      prefetch_hits_(AddCounter(r, "flotilla_worker_expert_prefetch_hits_total",
                                "Experts whose read a Prefetch hint started")),
      prefetch_calls_(AddCounter(r, "flotilla_worker_prefetch_calls_total",
                                 "Prefetch hints received")),
      prefetch_scheduled_(
          AddCounter(r, "flotilla_worker_prefetch_experts_scheduled_total",
                     "Expert reads Prefetch hints started")),
      budget_(prometheus::BuildGauge()
                  .Name("flotilla_worker_memory_budget_bytes")
                  .Help("The worker's memory budget (--mem)")
                  .Register(r)
                  .Add({})) {}

void WorkerMetrics::ComputeDone(int code, const v1::ComputeStats* stats) {
  calls_.Add({{"code", CodeLabel(code)}}).Increment();
  if (stats == nullptr) return;
  call_seconds_.Observe(stats->wall_seconds());
  queue_seconds_.Observe(stats->queue_seconds());
  read_bytes_.Increment(static_cast<double>(stats->bytes_read()));
  read_seconds_.Increment(stats->read_seconds());
  compute_seconds_.Increment(stats->compute_seconds());
  experts_computed_.Increment(stats->experts_computed());
  cache_hits_.Increment(stats->cache_hits());
  prefetch_hits_.Increment(stats->prefetch_hits());
}

void WorkerMetrics::PrefetchDone(uint32_t experts_scheduled) {
  prefetch_calls_.Increment();
  prefetch_scheduled_.Increment(experts_scheduled);
}

void WorkerMetrics::MemoryBudget(uint64_t bytes) {
  budget_.Set(static_cast<double>(bytes));
}

}  // namespace flotilla::expert_worker
