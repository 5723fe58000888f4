// PredictTokenTime's arithmetic on hand-made plans and rates, and the
// compute probe on ckpt_A's config (rates measured, positive).
#include "shared/plan/token_time.h"

#include <string>

#include "gtest/gtest.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/family/kimi_k3/kimi_k3_family.h"
#include "shared/plan/compute_probe.h"

namespace flotilla::plan {
namespace {

model::ModelShape CkptA() {
  auto c = model::LoadK3Config(std::string(FLOTILLA_TEST_DATA_DIR) +
                               "/k3/ckpt_A/config.json");
  EXPECT_TRUE(c.ok()) << c.status();
  return family::KimiK3Config(*c).Shape();
}

TokenTimeOptions Options() {
  TokenTimeOptions o;
  o.rates.threads = 2;
  o.rates.bf16_bytes_per_s = 10e9;
  o.rates.mxfp4_bytes_per_s = 4e9;
  o.rates.checksum_bytes_per_s = 0;  // no checksum term
  o.rates.kda_head_steps_per_s = 1e5;
  o.rates.mla_head_positions_per_s = 1e7;
  o.rates.expert_overlap_fraction = 0.5;
  o.trunk_read_bytes_per_s = 2e9;
  o.expert_read_bytes_per_s = 2e9;
  o.single_read_bytes_per_s = 1e9;
  o.prefetch_miss_fraction = 0.1;
  return o;
}

TEST(TokenTimeTest, ResidentTrunkIsComputeBoundWithExposedReads) {
  MemoryPlan p;
  p.trunk_layer_bytes = 2'000'000'000;  // 0.2 s of bf16 at 10 GB/s
  p.expert_read_bytes = 400'000'000;    // 0.1 s of MXFP4 at 4 GB/s
  const TokenTime t = PredictTokenTime(CkptA(), p, Options());
  EXPECT_DOUBLE_EQ(t.trunk_read_s, 0);
  EXPECT_DOUBLE_EQ(t.bf16_s, 0.2);
  EXPECT_DOUBLE_EQ(t.mxfp4_s, 0.1);
  // Routed runs plus the 10% wrong guesses, at 2 GB/s.
  EXPECT_DOUBLE_EQ(t.expert_read_s, 0.44e9 / 2e9);
  EXPECT_DOUBLE_EQ(t.miss_read_s, 0.04e9 / 1e9);
  // The guesses (top_k per layer: 0.2 s) hide behind half the bf16 time
  // (0.1 s): 0.1 s exposed, plus the misses' 0.04 s read alone.
  EXPECT_NEAR(t.seconds, t.compute_s() + 0.1 + 0.04, 1e-12);
  EXPECT_GT(t.attention_s, 0);  // ckpt_A has KDA and MLA layers
}

TEST(TokenTimeTest, StreamedTrunkIsDiskBound) {
  MemoryPlan p;
  p.trunk_layer_bytes = 2'000'000'000;
  p.trunk_read_bytes = 1'500'000'000;  // 0.75 s at 2 GB/s
  p.lm_head_read_bytes = 100'000'000;
  p.expert_read_bytes = 400'000'000;
  const TokenTime t = PredictTokenTime(CkptA(), p, Options());
  EXPECT_DOUBLE_EQ(t.trunk_read_s, 0.8);
  EXPECT_DOUBLE_EQ(t.seconds, t.disk_s());
  EXPECT_GT(t.disk_s(), t.compute_s());
  EXPECT_NE(t.ToString().find("s/token"), std::string::npos);
}

TEST(TokenTimeTest,
     TrunkChecksumsTakeSpareCyclesExpertChecksumsTheComputePath) {
  MemoryPlan p;
  p.trunk_layer_bytes = 2'000'000'000;  // 0.2 s of bf16
  p.trunk_read_bytes = 1'500'000'000;   // 0.75 s of disk at 2 GB/s
  p.lm_head_read_bytes = 100'000'000;
  p.expert_read_bytes = 400'000'000;
  TokenTimeOptions o = Options();
  o.rates.checksum_bytes_per_s = 4e9;  // one thread
  const TokenTime t = PredictTokenTime(CkptA(), p, o);
  // Trunk and lm_head: 1.6 GB = 0.4 CPU seconds on the verifier thread,
  // 0.2 s of the two threads; not on the compute path.
  EXPECT_DOUBLE_EQ(t.trunk_verify_cpu_s, 0.4);
  EXPECT_DOUBLE_EQ(t.trunk_verify_s, 0.2);
  // Expert runs on the compute path: the 90% guessed right (0.36 GB) over
  // both threads, the 10% misses' demand reads and the 10% wrong guesses
  // (0.08 GB) on one.
  ASSERT_EQ(o.rates.threads, 2);
  EXPECT_DOUBLE_EQ(t.verify_s, 0.36e9 / 8e9 + 0.08e9 / 4e9);
  EXPECT_DOUBLE_EQ(t.compute_s(),
                   t.bf16_s + t.mxfp4_s + t.attention_s + t.verify_s);
  EXPECT_DOUBLE_EQ(t.seconds, t.disk_s());  // 0.8 + 0.22 s of disk

  // A fast disk: the token is bound by the CPU the checksums take.
  o.trunk_read_bytes_per_s = 1e12;
  o.expert_read_bytes_per_s = 1e12;
  o.single_read_bytes_per_s = 1e12;
  o.rates.checksum_bytes_per_s = 0.5e9;
  const TokenTime fast = PredictTokenTime(CkptA(), p, o);
  EXPECT_DOUBLE_EQ(fast.trunk_verify_cpu_s, 3.2);
  // The verifier alone needs 3.2 s: more than compute + 1.6 s.
  ASSERT_LT(fast.compute_s() + fast.trunk_verify_s, 3.2);
  EXPECT_DOUBLE_EQ(fast.seconds, 3.2);
  // Checksums slower still relative to compute: compute + their share.
  o.rates.checksum_bytes_per_s = 4e9;
  o.rates.bf16_bytes_per_s = 1e9;  // 2 s of trunk matvecs
  const TokenTime slow = PredictTokenTime(CkptA(), p, o);
  EXPECT_DOUBLE_EQ(slow.seconds, slow.compute_s() + slow.trunk_verify_s);
}

TEST(TokenTimeTest, RemoteExpertsAreNotCharged) {
  MemoryPlan p;
  p.trunk_layer_bytes = 1'000'000'000;
  p.expert_read_bytes = 400'000'000;
  TokenTimeOptions o = Options();
  o.local_experts = false;
  const TokenTime t = PredictTokenTime(CkptA(), p, o);
  EXPECT_DOUBLE_EQ(t.mxfp4_s, 0);
  EXPECT_DOUBLE_EQ(t.expert_read_s, 0);
  EXPECT_DOUBLE_EQ(t.seconds, t.compute_s());
}

// The rate bounds only say that a real figure was measured. ThreadSanitizer
// runs the kernels an order of magnitude slower (bf16 at 7e7 bytes/s on a
// 2-vCPU VM), so its build asks for a twentieth of each.
#if defined(__SANITIZE_THREAD__)
constexpr double kSlowdown = 20;
#else
constexpr double kSlowdown = 1;
#endif

TEST(ComputeProbeTest, MeasuresEveryRate) {
  auto r = MeasureComputeRates(CkptA(), 2, 0.02);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->threads, 2);
  EXPECT_GT(r->bf16_bytes_per_s, 1e8 / kSlowdown);
  EXPECT_GT(r->mxfp4_bytes_per_s, 1e7 / kSlowdown);
  EXPECT_GT(r->kda_head_steps_per_s, 0);
  EXPECT_GT(r->mla_head_positions_per_s, 0);
  EXPECT_GT(r->checksum_bytes_per_s, 1e8 / kSlowdown);
  EXPECT_GT(r->expert_overlap_fraction, 0);
  EXPECT_LT(r->expert_overlap_fraction, 1);
  EXPECT_FALSE(MeasureComputeRates(CkptA(), 0, 0.02).ok());
  EXPECT_FALSE(MeasureComputeRates(CkptA(), 2, 0).ok());
}

// A speculative pass of `rows` tokens: the union of their experts is read
// once, each row computes its own experts and attention, the trunk bytes
// are those of one pass.
TEST(TokenTimeTest, SpeculativePassReadsTheUnionAndComputesEveryRow) {
  EXPECT_DOUBLE_EQ(ExpertUnion(384, 8, 1), 1.0);
  EXPECT_DOUBLE_EQ(ExpertUnion(8, 8, 5), 1.0);  // every row: all experts
  const double u = ExpertUnion(384, 8, 5);
  EXPECT_GT(u, 4.7);  // nearly no overlap at 8 of 384
  EXPECT_LT(u, 5.0);
  EXPECT_NEAR(ExpertUnion(4, 1, 2), 4 * (1 - 0.75 * 0.75), 1e-12);

  MemoryPlan p;
  p.trunk_layer_bytes = 2'000'000'000;
  p.trunk_read_bytes = 1'000'000'000;
  p.expert_read_bytes = 400'000'000;
  TokenTimeOptions one = Options();
  const TokenTime t1 = PredictTokenTime(CkptA(), p, one);
  TokenTimeOptions five = one;
  five.rows = 5;
  five.expert_union = 3;
  const TokenTime t5 = PredictTokenTime(CkptA(), p, five);
  EXPECT_DOUBLE_EQ(t5.trunk_read_s, t1.trunk_read_s);
  EXPECT_DOUBLE_EQ(t5.bf16_s, t1.bf16_s);  // the rate given is per pass
  EXPECT_NEAR(t5.mxfp4_s, 5 * t1.mxfp4_s, 1e-12);
  EXPECT_NEAR(t5.attention_s, 5 * t1.attention_s, 1e-12);
  EXPECT_NEAR(t5.expert_read_s, 3 * t1.expert_read_s, 1e-12);
}

}  // namespace
}  // namespace flotilla::plan
