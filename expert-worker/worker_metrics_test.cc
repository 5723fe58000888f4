#include "expert-worker/worker_metrics.h"

#include <string>

#include "gtest/gtest.h"
#include "shared/metrics/metrics_server.h"

namespace flotilla::expert_worker {
namespace {

using metrics::SampleValue;

TEST(WorkerMetricsTest, CountsCallsByCodeAndWhatTheyRead) {
  prometheus::Registry registry;
  WorkerMetrics m(registry);
  v1::ComputeStats stats;
  stats.set_bytes_read(1000);
  stats.set_experts_computed(3);
  stats.set_cache_hits(1);
  stats.set_prefetch_hits(2);
  stats.set_compute_seconds(0.5);
  stats.set_wall_seconds(0.002);
  m.ComputeDone(0, &stats);
  m.ComputeDone(0, &stats);
  m.ComputeDone(8, nullptr);  // refused: RESOURCE_EXHAUSTED
  m.PrefetchDone(4);
  m.MemoryBudget(1 << 20);
  const std::string s = metrics::Scrape(registry);
  EXPECT_EQ(SampleValue(s, R"(flotilla_worker_compute_calls_total{code="ok"})"),
            2);
  EXPECT_EQ(
      SampleValue(
          s,
          R"(flotilla_worker_compute_calls_total{code="resource_exhausted"})"),
      1);
  EXPECT_EQ(SampleValue(s, "flotilla_worker_read_bytes_total"), 2000);
  EXPECT_EQ(SampleValue(s, "flotilla_worker_experts_computed_total"), 6);
  EXPECT_EQ(SampleValue(s, "flotilla_worker_expert_cache_hits_total"), 2);
  EXPECT_EQ(SampleValue(s, "flotilla_worker_expert_prefetch_hits_total"), 4);
  EXPECT_EQ(SampleValue(s, "flotilla_worker_expert_compute_seconds_total"), 1);
  EXPECT_EQ(SampleValue(s, "flotilla_worker_compute_call_seconds_count"), 2);
  EXPECT_EQ(SampleValue(s, "flotilla_worker_prefetch_experts_scheduled_total"),
            4);
  EXPECT_EQ(SampleValue(s, "flotilla_worker_memory_budget_bytes"), 1 << 20);
  EXPECT_EQ(CodeLabel(14), "other");
}

}  // namespace
}  // namespace flotilla::expert_worker
