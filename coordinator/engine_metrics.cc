#include "coordinator/engine_metrics.h"

#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "shared/base/latency_counts.h"
#include "shared/metrics/metrics_server.h"

namespace flotilla::coordinator {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::Histogram;

// Bytes per token from 1 MB to 64 GB, by powers of 4.
Histogram::BucketBoundaries BytesBuckets() {
  Histogram::BucketBoundaries b;
  for (double v = 1 << 20; v <= 64.0 * (1ull << 30); v *= 4) b.push_back(v);
  return b;
}

Histogram::BucketBoundaries LatencyBuckets() {
  return {base::LatencyCounts::kBounds.begin(),
          base::LatencyCounts::kBounds.end()};
}

// Adds to `h` what `now` counted beyond `before` (same bounds).
void ObserveIncrease(const base::LatencyCounts& before,
                     const base::LatencyCounts& now, Histogram& h) {
  std::vector<double> increments(now.counts.size());
  bool any = false;
  for (size_t b = 0; b < now.counts.size(); ++b) {
    increments[b] = static_cast<double>(now.counts[b] - before.counts[b]);
    any = any || increments[b] > 0;
  }
  if (any) h.ObserveMultiple(increments, now.sum_seconds - before.sum_seconds);
}

template <typename T>
prometheus::Family<T>& Fam(prometheus::Registry& r, const std::string& name,
                           const std::string& help) {
  if constexpr (std::is_same_v<T, prometheus::Counter>) {
    return BuildCounter().Name(name).Help(help).Register(r);
  } else if constexpr (std::is_same_v<T, prometheus::Gauge>) {
    return BuildGauge().Name(name).Help(help).Register(r);
  } else {
    return prometheus::BuildHistogram().Name(name).Help(help).Register(r);
  }
}

using metrics::AddCounter;
using metrics::AddHistogram;

}  // namespace

EngineMetrics::EngineMetrics(prometheus::Registry& r)
    : read_bytes_(Fam<prometheus::Counter>(
          r, "flotilla_coordinator_read_bytes_total",
          "Bytes read from disk by source (with expert workers, experts are "
          "the workers' reads) and phase (decode: steps without prompt "
          "tokens)")),
      bytes_per_token_(Fam<Histogram>(
          r, "flotilla_coordinator_read_bytes_per_token",
          "Bytes read per generated token by source (one observation per "
          "step: the step's reads over its tokens)")),
      tokens_(Fam<prometheus::Counter>(r, "flotilla_coordinator_tokens_total",
                                       "Tokens generated, by phase")),
      steps_(Fam<prometheus::Counter>(r, "flotilla_coordinator_steps_total",
                                      "Forward steps, by phase")),
      forward_seconds_(Fam<prometheus::Counter>(
          r, "flotilla_coordinator_forward_seconds_total",
          "Wall time of forward steps, by phase")),
      io_wait_(Fam<prometheus::Counter>(
          r, "flotilla_coordinator_io_wait_seconds_total",
          "Forward steps blocked on reads, by source (experts: with expert "
          "workers, the layers' wall time waiting for them)")),
      trunk_read_busy_(AddCounter(
          r, "flotilla_coordinator_trunk_read_busy_seconds_total",
          "Time the trunk reader had reads in flight (bytes over this: the "
          "achieved read bandwidth)")),
      region_latency_(
          AddHistogram(r, "flotilla_coordinator_trunk_read_seconds",
                       "Latency of each streamed trunk region read, "
                       "submission to completion",
                       LatencyBuckets())),
      expert_read_latency_(
          AddHistogram(r, "flotilla_coordinator_expert_read_seconds",
                       "Latency of each expert read this process made, "
                       "queued to completion",
                       LatencyBuckets())),
      expert_reads_(AddCounter(r, "flotilla_coordinator_expert_reads_total",
                               "Expert runs read from disk")),
      experts_used_(AddCounter(r,
                               "flotilla_coordinator_expert_activations_total",
                               "Distinct experts computed, summed per layer")),
      cache_hits_(AddCounter(r, "flotilla_coordinator_expert_cache_hits_total",
                             "Experts served from the resident cache")),
      prefetch_hits_(
          AddCounter(r, "flotilla_coordinator_expert_prefetch_hits_total",
                     "Experts served from a lookahead prefetch")),
      expert_compute_(
          AddCounter(r, "flotilla_coordinator_expert_compute_seconds_total",
                     "Time computing routed experts")),
      routed_(Fam<prometheus::Counter>(
          r, "flotilla_coordinator_expert_routed_total",
          "Token-to-expert routings, by MoE layer")),
      rpc_seconds_(Fam<Histogram>(
          r, "flotilla_coordinator_rpc_duration_seconds",
          "Expert-worker RPCs answered (OK or not), by worker and method")),
      rpc_failures_(Fam<prometheus::Counter>(
          r, "flotilla_coordinator_rpc_failures_total",
          "Expert-worker RPCs that failed, by worker and method")),
      rpc_retries_(AddCounter(r, "flotilla_coordinator_rpc_retries_total",
                              "Compute calls re-sent to another holder after "
                              "a failure")),
      rpc_bytes_(Fam<prometheus::Counter>(
          r, "flotilla_coordinator_rpc_bytes_total",
          "Compute payloads, by direction (request, response)")),
      failovers_(Fam<prometheus::Counter>(
          r, "flotilla_coordinator_worker_failovers_total",
          "Times a worker was marked down and its experts re-dealt")),
      hints_(Fam<prometheus::Counter>(
          r, "flotilla_coordinator_prefetch_hints_total",
          "Prefetch hints sent, by worker")),
      worker_up_(Fam<prometheus::Gauge>(
          r, "flotilla_coordinator_worker_up",
          "1 while the coordinator uses the worker, 0 while it is down")),
      memory_(
          Fam<prometheus::Gauge>(r, "flotilla_coordinator_memory_charged_bytes",
                                 "Memory charged to the budget, by owner")),
      budget_(BuildGauge()
                  .Name("flotilla_coordinator_memory_budget_bytes")
                  .Help("The memory budget (--mem)")
                  .Register(r)
                  .Add({})) {}

void EngineMetrics::Step(const RunCounters& now, size_t tokens, bool decode,
                         double seconds) {
  const std::string phase = decode ? "decode" : "prefill";
  const TrunkStats& t = now.trunk;
  const TrunkStats& t0 = last_.trunk;
  const double embedding = t.embedding_bytes_read - t0.embedding_bytes_read;
  const double lm_head = t.lm_head_bytes_read - t0.lm_head_bytes_read;
  const double trunk = (t.bytes_read - t0.bytes_read) - embedding - lm_head;
  const double experts = now.experts.bytes_read - last_.experts.bytes_read;
  for (const auto& [source, bytes] :
       {std::pair<const char*, double>{"trunk", trunk},
        {"embedding", embedding},
        {"lm_head", lm_head},
        {"experts", experts}}) {
    read_bytes_.Add({{"source", source}, {"phase", phase}}).Increment(bytes);
    if (tokens > 0) {
      bytes_per_token_.Add({{"source", source}}, BytesBuckets())
          .Observe(bytes / static_cast<double>(tokens));
    }
  }
  tokens_.Add({{"phase", phase}}).Increment(static_cast<double>(tokens));
  steps_.Add({{"phase", phase}}).Increment();
  forward_seconds_.Add({{"phase", phase}}).Increment(seconds);
  io_wait_.Add({{"source", "trunk"}})
      .Increment(t.wait_seconds - t0.wait_seconds);
  io_wait_.Add({{"source", "experts"}})
      .Increment(now.experts.io_wait_seconds - last_.experts.io_wait_seconds);
  trunk_read_busy_.Increment(t.read_seconds - t0.read_seconds);
  ObserveIncrease(t0.region_read_latency, t.region_read_latency,
                  region_latency_);
  const ExpertBackendStats& x = now.experts;
  const ExpertBackendStats& x0 = last_.experts;
  ObserveIncrease(x0.read_latency, x.read_latency, expert_read_latency_);
  expert_reads_.Increment(x.experts_read - x0.experts_read);
  experts_used_.Increment(x.experts_used - x0.experts_used);
  cache_hits_.Increment(x.cache_hits - x0.cache_hits);
  prefetch_hits_.Increment(x.prefetch_hits - x0.prefetch_hits);
  expert_compute_.Increment(x.compute_seconds - x0.compute_seconds);
  for (size_t layer = 0; layer < now.routed_by_layer.size(); ++layer) {
    const uint64_t before =
        layer < last_.routed_by_layer.size() ? last_.routed_by_layer[layer] : 0;
    const uint64_t n = now.routed_by_layer[layer];
    // Dense layers never route: no series for them.
    if (n == 0) continue;
    routed_.Add({{"layer", std::to_string(layer)}})
        .Increment(static_cast<double>(n - before));
  }
  if (now.remote) AddRemote(now.remote_stats);
  last_ = now;
}

void EngineMetrics::AddRemote(const RemoteStats& now) {
  const RemoteStats& before = last_.remote_stats;
  rpc_retries_.Increment(now.retried_calls - before.retried_calls);
  rpc_bytes_.Add({{"direction", "request"}})
      .Increment(now.request_bytes - before.request_bytes);
  rpc_bytes_.Add({{"direction", "response"}})
      .Increment(now.response_bytes - before.response_bytes);
  for (size_t w = 0; w < now.workers.size(); ++w) {
    const WorkerRpcStats& s = now.workers[w];
    const WorkerRpcStats zero;
    const WorkerRpcStats& b =
        w < before.workers.size() ? before.workers[w] : zero;
    const std::string& worker = s.address;
    for (const auto& [method, latency, latency_before, failed, failed_before] :
         {std::tuple{"Compute", &s.compute, &b.compute, s.compute_failed,
                     b.compute_failed},
          std::tuple{"Info", &s.info, &b.info, s.info_failed, b.info_failed}}) {
      const prometheus::Labels labels = {{"worker", worker},
                                         {"method", method}};
      ObserveIncrease(*latency_before, *latency,
                      rpc_seconds_.Add(labels, LatencyBuckets()));
      rpc_failures_.Add(labels).Increment(
          static_cast<double>(failed - failed_before));
    }
    failovers_.Add({{"worker", worker}})
        .Increment(static_cast<double>(s.failovers - b.failovers));
    hints_.Add({{"worker", worker}})
        .Increment(static_cast<double>(s.prefetch_sent - b.prefetch_sent));
    worker_up_.Add({{"worker", worker}}).Set(s.up ? 1 : 0);
  }
}

void EngineMetrics::Memory(const Engine& engine) {
  const auto* accountant = engine.accountant.get();
  if (accountant == nullptr) return;
  budget_.Set(static_cast<double>(accountant->budget()));
  for (const auto& [owner, bytes] : accountant->owners()) {
    memory_.Add({{"owner", owner}}).Set(static_cast<double>(bytes));
  }
}

}  // namespace flotilla::coordinator
