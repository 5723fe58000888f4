// EngineMetrics turns the engine's cumulative counters into Prometheus
// series: each Step adds the increase since the last one under its phase,
// sources split as the trunk reports them, latencies keep their buckets,
// and the expert workers' RPCs appear per worker and method.
#include "coordinator/engine_metrics.h"

#include <string>

#include "gtest/gtest.h"
#include "shared/metrics/metrics_server.h"

namespace flotilla::coordinator {
namespace {

using metrics::SampleValue;

TEST(EngineMetricsTest, StepsAddTheIncreaseByPhaseAndSource) {
  prometheus::Registry registry;
  EngineMetrics metrics(registry);
  RunCounters c;
  // The prefill: 1000 trunk bytes of which 100 embedding and 300 lm_head.
  c.trunk.bytes_read = 1000;
  c.trunk.embedding_bytes_read = 100;
  c.trunk.lm_head_bytes_read = 300;
  c.trunk.region_read_latency.Add(0.0003);
  c.experts.bytes_read = 5000;
  c.experts.read_latency.Add(0.004);
  c.experts.read_latency.Add(0.004);
  c.routed_by_layer = {0, 8, 8};  // layer 0 is dense
  metrics.Step(c, /*prompt_tokens=*/9, /*generated_tokens=*/1, 0.5);
  // Two decode steps of one token each.
  c.trunk.bytes_read += 700;
  c.trunk.lm_head_bytes_read += 300;
  c.trunk.region_read_latency.Add(2.0);
  c.experts.bytes_read += 2000;
  c.routed_by_layer = {0, 10, 10};
  metrics.Step(c, 0, 1, 0.25);
  c.trunk.bytes_read += 700;
  c.trunk.lm_head_bytes_read += 300;
  c.experts.bytes_read += 2000;
  c.routed_by_layer = {0, 12, 12};
  metrics.Step(c, 0, 1, 0.25);

  const std::string s = metrics::Scrape(registry);
  auto bytes = [&](const char* phase, const char* source) {
    return SampleValue(
        s, std::string("flotilla_coordinator_read_bytes_total{phase=\"") +
               phase + "\",source=\"" + source + "\"}");
  };
  EXPECT_EQ(bytes("prefill", "trunk"), 600);
  EXPECT_EQ(bytes("prefill", "embedding"), 100);
  EXPECT_EQ(bytes("prefill", "lm_head"), 300);
  EXPECT_EQ(bytes("prefill", "experts"), 5000);
  EXPECT_EQ(bytes("decode", "trunk"), 800);
  EXPECT_EQ(bytes("decode", "embedding"), 0);
  EXPECT_EQ(bytes("decode", "lm_head"), 600);
  EXPECT_EQ(bytes("decode", "experts"), 4000);
  // Issue 44 item 12: prefill counts the prompt tokens fed (9), not the
  // one token the prefill step produced; decode the decode steps' tokens.
  EXPECT_EQ(
      SampleValue(s, R"(flotilla_coordinator_tokens_total{phase="prefill"})"),
      9);
  EXPECT_EQ(
      SampleValue(s, R"(flotilla_coordinator_tokens_total{phase="decode"})"),
      2);
  EXPECT_EQ(
      SampleValue(
          s, R"(flotilla_coordinator_forward_seconds_total{phase="decode"})"),
      0.5);
  EXPECT_EQ(
      SampleValue(s, R"(flotilla_coordinator_expert_routed_total{layer="1"})"),
      12);
  EXPECT_EQ(
      SampleValue(s, R"(flotilla_coordinator_expert_routed_total{layer="0"})"),
      -1);
  EXPECT_EQ(SampleValue(s, "flotilla_coordinator_trunk_read_seconds_count"), 2);
  EXPECT_EQ(SampleValue(s, "flotilla_coordinator_expert_read_seconds_count"),
            2);
  EXPECT_EQ(
      SampleValue(
          s, R"(flotilla_coordinator_expert_read_seconds_bucket{le="0.0025"})"),
      0);
  EXPECT_EQ(
      SampleValue(
          s, R"(flotilla_coordinator_expert_read_seconds_bucket{le="0.005"})"),
      2);
  EXPECT_EQ(
      SampleValue(
          s, R"(flotilla_coordinator_trunk_read_seconds_bucket{le="0.0005"})"),
      1);
  EXPECT_EQ(SampleValue(
                s, R"(flotilla_coordinator_trunk_read_seconds_bucket{le="1"})"),
            1);
  EXPECT_EQ(
      SampleValue(s,
                  R"(flotilla_coordinator_trunk_read_seconds_bucket{le="10"})"),
      2);
}

TEST(EngineMetricsTest, WorkersRpcsByWorkerAndMethod) {
  prometheus::Registry registry;
  EngineMetrics metrics(registry);
  RunCounters c;
  c.remote = true;
  c.remote_stats.workers.resize(2);
  c.remote_stats.workers[0].address = "w0:7001";
  c.remote_stats.workers[1].address = "w1:7001";
  c.remote_stats.workers[0].compute.Add(0.002);
  c.remote_stats.workers[1].compute.Add(0.004);
  metrics.Step(c, 4, 1, 0.1);
  // Worker 1 fails a call, is marked down; its call is retried on worker 0.
  c.remote_stats.workers[1].compute.Add(10);
  c.remote_stats.workers[1].compute_failed = 1;
  c.remote_stats.workers[1].failovers = 1;
  c.remote_stats.workers[1].up = false;
  c.remote_stats.workers[0].compute.Add(0.003);
  c.remote_stats.retried_calls = 1;
  metrics.Step(c, 0, 1, 0.1);

  const std::string s = metrics::Scrape(registry);
  EXPECT_EQ(
      SampleValue(
          s,
          R"(flotilla_coordinator_rpc_duration_seconds_count{method="Compute",worker="w0:7001"})"),
      2);
  EXPECT_EQ(
      SampleValue(
          s,
          R"(flotilla_coordinator_rpc_duration_seconds_count{method="Compute",worker="w1:7001"})"),
      2);
  EXPECT_EQ(
      SampleValue(
          s,
          R"(flotilla_coordinator_rpc_failures_total{method="Compute",worker="w1:7001"})"),
      1);
  EXPECT_EQ(
      SampleValue(
          s,
          R"(flotilla_coordinator_rpc_failures_total{method="Compute",worker="w0:7001"})"),
      0);
  EXPECT_EQ(SampleValue(s, "flotilla_coordinator_rpc_retries_total"), 1);
  EXPECT_EQ(
      SampleValue(
          s,
          R"(flotilla_coordinator_worker_failovers_total{worker="w1:7001"})"),
      1);
  EXPECT_EQ(
      SampleValue(s, R"(flotilla_coordinator_worker_up{worker="w0:7001"})"), 1);
  EXPECT_EQ(
      SampleValue(s, R"(flotilla_coordinator_worker_up{worker="w1:7001"})"), 0);
}

}  // namespace
}  // namespace flotilla::coordinator
