// MakeMemoryPlan on ckpt_A's config with synthetic region sizes: what gets
// pinned as the budget grows, that every plan fits its budget, and that the
// streamed lm_head's pass buffers are charged exactly when it is streamed.
#include "shared/plan/memory_plan.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <string>

#include "gtest/gtest.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/family/kimi_k3/kimi_k3_family.h"

namespace flotilla::plan {
namespace {

constexpr uint64_t kMiB = 1 << 20;

class MemoryPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = model::LoadK3Config(std::string(FLOTILLA_TEST_DATA_DIR) +
                                 "/k3/ckpt_A/config.json");
    ASSERT_TRUE(c.ok()) << c.status();
    layers_ = c->num_hidden_layers;
    in_.shape = family::KimiK3Config(*c).Shape();
    in_.max_context = 64;
    in_.prefill_chunk = 8;
    // Region sizes chosen by hand (the plan only adds them up): layer 0 is
    // the biggest, as K3's dense layer is.
    for (int l = 0; l < c->num_hidden_layers; ++l) {
      in_.layer_region_bytes.push_back((l == 0 ? 12 : 4) * kMiB);
    }
    in_.vocab_region_bytes = 6 * kMiB;
    in_.vocab_chunk_bytes = 64 << 10;
    in_.lm_head_stream_bytes = 2 * kMiB;
    in_.globals_bytes = 4096;
    in_.expert_run_bytes = 256 << 10;
  }

  // The plan's fixed part alone: everything but trunk, vocab and cache.
  uint64_t Fixed() {
    in_.budget_bytes = 1ull << 40;
    in_.stream_vocab = true;
    in_.max_pinned_layers = 0;
    auto p = MakeMemoryPlan(in_);
    EXPECT_TRUE(p.ok());
    in_.stream_vocab = false;
    in_.max_pinned_layers = -1;
    return p->total_bytes - p->ring_slots * p->ring_slot_bytes;
  }

  static bool Charged(const MemoryPlan& p, const std::string& owner) {
    return std::any_of(p.charges.begin(), p.charges.end(),
                       [&](const auto& c) { return c.first == owner; });
  }

  PlanInputs in_;
  int layers_ = 0;
};

TEST_F(MemoryPlanTest, EveryPlanFitsAndChargesAddUp) {
  const uint64_t fixed = Fixed();
  int last_pinned = -1;
  // From the minimum (two ring slots of the largest layer) up to all of it.
  for (uint64_t extra = 24; extra <= 200; extra += 2) {
    in_.budget_bytes = fixed + extra * kMiB;
    auto p = MakeMemoryPlan(in_);
    ASSERT_TRUE(p.ok()) << extra << ": " << p.status();
    EXPECT_LE(p->total_bytes, in_.budget_bytes) << extra;
    uint64_t sum = 0;
    for (const auto& [owner, bytes] : p->charges) sum += bytes;
    EXPECT_EQ(sum, p->total_bytes) << extra;
    // More memory never pins fewer layers.
    EXPECT_GE(p->pinned_layers, last_pinned) << extra;
    last_pinned = p->pinned_layers;
    if (p->pinned_layers < p->num_layers) {
      EXPECT_GE(p->ring_slots, 2);
    }
  }
  EXPECT_EQ(last_pinned, layers_);
}

// Each charge against a number worked out by hand from ckpt_A's config
// (hidden 128, 13 layers of which 3, 7, 11, 12 are MLA and the other 9 KDA,
// KDA 4 heads x 16, conv kernel 4, kv_lora 32 + rope 8, top-2 of 8
// experts), not from the planner's own functions.
TEST_F(MemoryPlanTest, ChargesMatchTheConfigWorkedByHand) {
  in_.budget_bytes = 1ull << 40;  // everything pinned
  auto p = MakeMemoryPlan(in_);
  ASSERT_TRUE(p.ok()) << p.status();
  std::map<std::string, uint64_t> got(p->charges.begin(), p->charges.end());
  // Sequence state for 64 positions: per MLA layer 64 x (32 + 8) floats;
  // per KDA layer the 4 x 16 x 16 state plus the 3 x (4 x 16) x (4 - 1)
  // conv history, in floats.
  const uint64_t mla = 4 * 64 * (32 + 8) * 4;               // 40960
  const uint64_t kda = 9 * (4 * 16 * 16 + 3 * 64 * 3) * 4;  // 57600
  EXPECT_EQ(got["sequence_state"], mla + kda);
  // Workspace per token, in floats: residual blocks (13 / 3 + 2) and 5 more
  // rows of 128; 9 KDA projections of 64; MLA queries 2 x 4 x (24 + 8 +
  // 16); the larger of the dense FFN (3 x 96) and the shared experts (3 x
  // 64 x 2); the routed experts 2 x (2 x 64 + 3 x 64); the 8 router scores;
  // the 256 logits. For a prefill chunk of 8 tokens.
  const uint64_t per_token =
      (6 + 5) * 128 + 9 * 64 + 2 * 4 * 48 + 384 + 2 * 320 + 8 + 256;
  EXPECT_EQ(per_token, 3656u);
  EXPECT_EQ(got["workspace"], per_token * 4 * 8);
  EXPECT_EQ(got["trunk.globals"], 4096u);
  EXPECT_EQ(got["experts.read_buffers"], 2u * (256 << 10));
  EXPECT_EQ(got["vocab.chunk_buffers"], 64u << 10);
  // The whole trunk pinned: layer 0 of 12 MiB and 12 layers of 4 MiB, and
  // both 6 MiB vocab regions, with no ring and no lm_head pass buffers.
  EXPECT_EQ(got["trunk.pinned_layers"], (12 + 12 * 4) * kMiB);
  EXPECT_EQ(got["lm_head"], 6 * kMiB);
  EXPECT_EQ(got["embedding"], 6 * kMiB);
  EXPECT_EQ(got.count("lm_head.stream_buffers"), 0u);
  EXPECT_EQ(p->ring_slots, 0);
  EXPECT_EQ(p->pinned_layers, 13);
  // Nothing of the trunk is read per token; the experts are: 12 MoE layers
  // x top-2 x a 256 KiB run.
  EXPECT_EQ(p->trunk_read_bytes, 0u);
  EXPECT_EQ(p->expert_read_bytes, 12u * 2 * (256 << 10));
}

TEST_F(MemoryPlanTest, StreamedLmHeadChargesItsPassBuffersPinnedOneDoesNot) {
  // Room for layers 0-1 pinned and a ring of two 4 MiB slots, not for the
  // 6 MiB lm_head.
  in_.budget_bytes = Fixed() + 26 * kMiB;
  auto tight = MakeMemoryPlan(in_);
  ASSERT_TRUE(tight.ok()) << tight.status();
  EXPECT_EQ(tight->pinned_layers, 2);
  EXPECT_FALSE(tight->lm_head_pinned);
  EXPECT_TRUE(Charged(*tight, "lm_head.stream_buffers"));
  EXPECT_EQ(tight->lm_head_read_bytes, in_.vocab_region_bytes);

  in_.budget_bytes = 1ull << 40;
  auto roomy = MakeMemoryPlan(in_);
  ASSERT_TRUE(roomy.ok());
  EXPECT_TRUE(roomy->lm_head_pinned);
  EXPECT_FALSE(Charged(*roomy, "lm_head.stream_buffers"));
  EXPECT_EQ(roomy->lm_head_read_bytes, 0u);
  EXPECT_EQ(roomy->read_bytes_per_token(), roomy->expert_read_bytes);
}

TEST_F(MemoryPlanTest, PinningTheLmHeadReusesItsPassBuffers) {
  // Everything pinned but the vocab; then exactly room for the lm_head once
  // its pass buffers are given back, and one byte less.
  in_.budget_bytes = 1ull << 40;
  in_.stream_vocab = true;
  auto base = MakeMemoryPlan(in_);
  ASSERT_TRUE(base.ok());
  ASSERT_EQ(base->pinned_layers, layers_);
  in_.stream_vocab = false;
  const uint64_t exact =
      base->total_bytes - in_.lm_head_stream_bytes + in_.vocab_region_bytes;
  in_.budget_bytes = exact;
  auto fits = MakeMemoryPlan(in_);
  ASSERT_TRUE(fits.ok());
  EXPECT_TRUE(fits->lm_head_pinned);
  EXPECT_FALSE(fits->embed_pinned);
  EXPECT_EQ(fits->total_bytes, exact);
  in_.budget_bytes = exact - 1;
  auto short_by_one = MakeMemoryPlan(in_);
  ASSERT_TRUE(short_by_one.ok());
  EXPECT_FALSE(short_by_one->lm_head_pinned);
  EXPECT_TRUE(Charged(*short_by_one, "lm_head.stream_buffers"));
}

TEST_F(MemoryPlanTest, MaxPinnedLayersCapsThePrefix) {
  in_.budget_bytes = 1ull << 40;
  in_.max_pinned_layers = 2;
  auto p = MakeMemoryPlan(in_);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->pinned_layers, 2);
  EXPECT_GE(p->ring_slots, 2);
  const uint64_t unpinned =
      std::accumulate(in_.layer_region_bytes.begin() + 2,
                      in_.layer_region_bytes.end(), uint64_t{0});
  EXPECT_EQ(p->trunk_read_bytes, unpinned);
}

TEST_F(MemoryPlanTest, MetadataIsChargedAndResidentAtOpen) {
  in_.budget_bytes = 1ull << 40;
  in_.process_baseline_bytes = 3 * kMiB;
  auto without = MakeMemoryPlan(in_);
  ASSERT_TRUE(without.ok()) << without.status();
  in_.metadata_bytes = 5 * kMiB;
  auto with = MakeMemoryPlan(in_);
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(with->total_bytes, without->total_bytes + 5 * kMiB);
  EXPECT_EQ(with->open_bytes(), without->open_bytes() + 5 * kMiB);
  // Open bytes: everything but the state, workspace and prefix cache.
  uint64_t lazy = 0;
  for (const auto& [owner, bytes] : with->charges) {
    if (owner == "sequence_state" || owner == "workspace") lazy += bytes;
  }
  EXPECT_GT(lazy, 0u);
  EXPECT_EQ(with->open_bytes(), with->total_bytes - lazy);
}

TEST_F(MemoryPlanTest, BudgetBelowTheMinimumNamesItsParts) {
  in_.budget_bytes = 1 * kMiB;
  auto p = MakeMemoryPlan(in_);
  ASSERT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  for (const char* part : {"sequence_state", "workspace", "trunk.ring",
                           "lm_head.stream_buffers"}) {
    EXPECT_NE(p.status().message().find(part), std::string::npos)
        << part << ": " << p.status().message();
  }
}

}  // namespace
}  // namespace flotilla::plan
