// The family registry: each config finds its family, unknown ones are
// refused naming what is supported, each family's neutral shape holds what
// its engine keeps, and a family that exists only in this test is found,
// sized and planned without any shared file naming it.
#include "shared/family/family.h"

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/family/kimi_k3/kimi_k3_family.h"
#include "shared/family/mixtral/mixtral_family.h"
#include "shared/plan/memory_plan.h"

namespace flotilla::family {
namespace {

using ::testing::HasSubstr;

const std::string kCkptA =
    std::string(FLOTILLA_TEST_DATA_DIR) + "/k3/ckpt_A/config.json";
const std::string kStories = std::string(FLOTILLA_TEST_DATA_DIR) +
                             "/../../models/stories260k-moe/config.json";

TEST(FamilyRegistryTest, EachConfigFindsItsFamily) {
  auto k3 = LoadFamilyConfig(kCkptA);
  ASSERT_TRUE(k3.ok()) << k3.status();
  EXPECT_EQ((*k3)->family().name, "kimi_k3");
  auto stories = LoadFamilyConfig(kStories);
  ASSERT_TRUE(stories.ok()) << stories.status();
  EXPECT_EQ((*stories)->family().name, "mixtral");
  auto moe = LoadMoeSpec(kStories);
  ASSERT_TRUE(moe.ok()) << moe.status();
  EXPECT_EQ(moe->num_experts, (*stories)->Moe().num_experts);
  EXPECT_EQ(moe->hidden_size, (*stories)->Moe().hidden_size);

  // model_type decides; without one, the architectures; without either,
  // Kimi K3's flat form.
  auto by_type = FindFamily({{"model_type", "kimi_k3"}}, "c");
  ASSERT_TRUE(by_type.ok());
  EXPECT_EQ((*by_type)->name, "kimi_k3");
  auto by_arch = FindFamily({{"architectures", {"MixtralForCausalLM"}}}, "c");
  ASSERT_TRUE(by_arch.ok());
  EXPECT_EQ((*by_arch)->name, "mixtral");
  auto flat = FindFamily(nlohmann::json::object(), "c");
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ((*flat)->name, "kimi_k3");
  // Kimi K2 is DeepSeek-V3's architecture, not Kimi K3's (whose "kimi"
  // prefix would otherwise claim it).
  for (const char* type : {"kimi_k2", "deepseek_v3"}) {
    auto ds = FindFamily({{"model_type", type}}, "c");
    ASSERT_TRUE(ds.ok());
    EXPECT_EQ((*ds)->name, "deepseek_v3") << type;
  }
  auto ds_arch =
      FindFamily({{"architectures", {"DeepseekV3ForCausalLM"}}}, "c");
  ASSERT_TRUE(ds_arch.ok());
  EXPECT_EQ((*ds_arch)->name, "deepseek_v3");
}

// Counts no model has are refused for every family before the plan loops
// over them (a Mixtral config of 2^31 layers used to hang `--plan`).
TEST(FamilyRegistryTest, LayerAndExpertCountsAreBounded) {
  std::ifstream in(kStories);
  nlohmann::json c = nlohmann::json::parse(in);
  c["num_hidden_layers"] = 2000000000;
  auto huge = ParseFamilyConfig(c.dump(), "cfg.json");
  ASSERT_TRUE(huge.ok()) << huge.status();
  const absl::Status bounds = CheckLoopBounds(**huge, "cfg.json");
  ASSERT_FALSE(bounds.ok());
  EXPECT_THAT(bounds.message(),
              HasSubstr("num_hidden_layers 2000000000 exceed the engine's "
                        "limits (4096 layers"));
  auto stories = LoadFamilyConfig(kStories);
  ASSERT_TRUE(stories.ok());
  EXPECT_TRUE(CheckLoopBounds(**stories, "cfg.json").ok());
}

TEST(FamilyRegistryTest, UnknownModelTypesAreRefusedNamingTheSupportedOnes) {
  auto other = FindFamily({{"model_type", "llama4_text"}}, "cfg.json");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(other.status().message(), HasSubstr("cfg.json"));
  EXPECT_THAT(other.status().message(), HasSubstr("'llama4_text'"));
  EXPECT_THAT(other.status().message(), HasSubstr("kimi_k3"));
  EXPECT_THAT(other.status().message(), HasSubstr("mixtral"));
  EXPECT_THAT(other.status().message(), HasSubstr("qwen3_moe"));
  EXPECT_THAT(other.status().message(), HasSubstr("deepseek_v3"));
  auto typed = FindFamily({{"model_type", 3}}, "cfg.json");
  ASSERT_FALSE(typed.ok());
  EXPECT_THAT(typed.status().message(), HasSubstr("model_type"));
  EXPECT_FALSE(FindFamily(nlohmann::json::array(), "cfg.json").ok());
  // The family's own parser names its bad fields.
  auto bad = ParseFamilyConfig(R"({"model_type": "mixtral"})", "cfg.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("hidden_size"));
  auto moe = ParseMoeSpec(R"({"model_type": "llama4_text"})", "cfg.json");
  ASSERT_FALSE(moe.ok());
  EXPECT_THAT(moe.status().message(), HasSubstr("'llama4_text'"));
}

TEST(FamilyShapeTest, MixtralHoldsKeysAndValuesPerLayerAndPosition) {
  auto c = LoadFamilyConfig(kStories);
  ASSERT_TRUE(c.ok()) << c.status();
  const model::ModelShape s = (*c)->Shape();
  EXPECT_EQ(s.num_layers, 5);
  EXPECT_EQ(s.moe_layers, 5);
  EXPECT_EQ(s.num_experts, 8);
  EXPECT_EQ(s.experts_per_token, 2);
  // 5 layers x (K and V) x 4 kv heads x head_dim 8 x 4 bytes.
  EXPECT_EQ(s.state_bytes_per_position, 5u * 2 * 4 * 8 * 4);
  EXPECT_EQ(s.fixed_state_bytes, 0u);
  EXPECT_EQ(s.SequenceStateBytes(512), 512u * 1280);
  EXPECT_EQ(s.max_positions, 512);
  EXPECT_EQ(s.recurrent_layers, 0);
  EXPECT_EQ(s.attention_layers, 5);
  EXPECT_EQ(s.attention_key_width, 8);
  // q, k, v, o and the router per layer, then the lm_head; all before the
  // routed experts.
  ASSERT_EQ(s.matmuls.size(), 5u * 5 + 1);
  EXPECT_EQ(s.matmuls[0].rows, 64);  // q_proj: 8 heads x 8
  EXPECT_EQ(s.matmuls[4].rows, 8);   // router: 8 experts
  EXPECT_EQ(s.matmuls[4].uses_before_experts, 1);
  EXPECT_EQ(s.matmuls.back().rows, 512);
  const TrunkSizes t = ReleasedTrunkSizes(**c);
  ASSERT_EQ(t.layer_region_bytes.size(), 5u);
  EXPECT_EQ(t.vocab_row_bytes, 64 * 2);  // BF16 as released
  EXPECT_EQ(t.expert_run_bytes, 3u * 172 * 64 * 2);
}

// The plan on Mixtral's shape: its embedding and lm_head are part of the
// minimum (its forward pass reads them whole), and a budget that holds
// every expert after the trunk keeps them all, so a token reads none.
TEST(FamilyShapeTest, MixtralPlansResidentVocabAndCachesEveryExpertThatFits) {
  auto c = LoadFamilyConfig(kStories);
  ASSERT_TRUE(c.ok()) << c.status();
  const TrunkSizes t = ReleasedTrunkSizes(**c);
  plan::PlanInputs in;
  in.shape = (*c)->Shape();
  in.layer_region_bytes = t.layer_region_bytes;
  in.vocab_region_bytes = t.vocab_region_bytes;
  in.globals_bytes = t.globals_bytes;
  in.expert_run_bytes = 8192;
  in.vocab_chunk_bytes = 4096;
  in.lm_head_stream_bytes = 8192;
  in.max_context = 64;
  in.prefill_chunk = 4;
  in.budget_bytes = 64ull << 20;
  auto big = plan::MakeMemoryPlan(in);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_TRUE(big->lm_head_pinned && big->embed_pinned);
  EXPECT_EQ(big->expert_cache_slots, 5 * 8);
  EXPECT_EQ(big->expert_read_bytes, 0u);
  const uint64_t all = big->total_bytes;

  // One expert short: no cache, top-2 of 5 layers read per token.
  in.budget_bytes = all - 8192;
  auto tight = plan::MakeMemoryPlan(in);
  ASSERT_TRUE(tight.ok()) << tight.status();
  EXPECT_EQ(tight->expert_cache_slots, 0);
  EXPECT_EQ(tight->expert_read_bytes, 5u * 2 * 8192);
  // Even with no layer pinned the vocabulary stays resident.
  in.max_pinned_layers = 0;
  auto none = plan::MakeMemoryPlan(in);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->lm_head_pinned && none->embed_pinned);
  EXPECT_EQ(none->lm_head_read_bytes, 0u);
  bool stream_buffers = false;
  for (const auto& [owner, bytes] : none->charges) {
    stream_buffers |= owner == "lm_head.stream_buffers";
  }
  EXPECT_FALSE(stream_buffers);
  // Asked to stream them anyway: refused, naming the flag.
  in.stream_vocab = true;
  auto streamed = plan::MakeMemoryPlan(in);
  ASSERT_FALSE(streamed.ok());
  EXPECT_THAT(streamed.status().message(), HasSubstr("--stream-vocab"));
}

TEST(FamilyShapeTest, KimiK3SplitsStateBetweenMlaAndKdaLayers) {
  auto loaded = model::LoadK3Config(kCkptA);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const model::K3Config& c = *loaded;
  const model::ModelShape s = KimiK3Config(c).Shape();
  int mla = 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) mla += c.IsMlaLayer(l);
  EXPECT_EQ(s.attention_layers, mla);
  EXPECT_EQ(s.recurrent_layers, c.num_hidden_layers - mla);
  EXPECT_EQ(
      s.state_bytes_per_position,
      static_cast<uint64_t>(mla) * (c.kv_lora_rank + c.qk_rope_head_dim) * 4);
  EXPECT_EQ(s.moe_layers, c.num_hidden_layers - c.first_k_dense_replace);
  EXPECT_EQ(s.expert_format, "mxfp4");
  // A dense layer computes nothing before routed experts it does not have.
  for (const model::TrunkMatmul& m : s.matmuls) {
    EXPECT_LE(m.uses_before_experts, m.uses);
  }
}

// A family that exists only here: one matrix per layer, experts named as
// every family names them.
class ToyConfig : public FamilyConfig {
 public:
  ToyConfig(const Family* family, int layers, int hidden)
      : family_(family), layers_(layers), hidden_(hidden) {}
  const Family& family() const override { return *family_; }
  model::MoeSpec Moe() const override {
    model::MoeSpec m;
    m.num_layers = layers_;
    m.num_experts = 4;
    m.num_experts_per_token = 1;
    m.hidden_size = hidden_;
    m.intermediate_size = 2 * hidden_;
    m.expert_names.prefix = "toy.";
    return m;
  }
  model::ModelShape Shape() const override {
    model::ModelShape s;
    s.num_layers = layers_;
    s.moe_layers = layers_;
    s.num_experts = 4;
    s.experts_per_token = 1;
    s.vocab_size = 100;
    s.hidden_size = hidden_;
    s.state_bytes_per_position = 8 * layers_;
    s.workspace_bytes_per_token = 4 * hidden_;
    return s;
  }
  std::vector<pack::FieldSpec> LayerSchema(int layer) const override {
    return {pack::FieldSpec{"mix", pack::FieldKind::kMatrix,
                            "toy.layers." + std::to_string(layer) + ".mix", "",
                            static_cast<size_t>(hidden_),
                            static_cast<size_t>(hidden_)}};
  }
  std::vector<pack::FieldSpec> GlobalsSchema() const override {
    return {pack::FieldSpec{"norm", pack::FieldKind::kVector, "toy.norm", "",
                            static_cast<size_t>(hidden_), 0}};
  }
  std::vector<pack::FieldSpec> VocabSchema(bool) const override {
    return {pack::FieldSpec{"matrix", pack::FieldKind::kMatrix, "toy.embed", "",
                            100, static_cast<size_t>(hidden_)}};
  }
  uint64_t ReleasedExpertRunBytes() const override {
    return 3ull * 2 * hidden_ * hidden_ * 4;
  }
  std::string ReleasedFormats() const override { return "F32 everything"; }

 private:
  const Family* family_;
  int layers_, hidden_;
};

absl::StatusOr<std::unique_ptr<FamilyConfig>> ParseToy(
    const nlohmann::json& root, const std::string&, const std::string& source);

const Family kToy{
    .name = "toy_moe",
    .model_types = {"toy_moe"},
    .model_type_prefixes = {},
    .architectures = {"ToyMoeForCausalLM"},
    .default_without_model_type = false,
    .parse = &ParseToy,
};

absl::StatusOr<std::unique_ptr<FamilyConfig>> ParseToy(
    const nlohmann::json& root, const std::string&, const std::string& source) {
  const auto layers = root.find("num_hidden_layers");
  if (layers == root.end() || !layers->is_number_integer() || *layers < 1 ||
      *layers > 64) {
    return absl::InvalidArgumentError(
        source + ": num_hidden_layers: expected an integer in [1, 64]");
  }
  return std::unique_ptr<FamilyConfig>(
      new ToyConfig(&kToy, layers->get<int>(), 256));
}

TEST(FamilyRegistryTest, AFamilyOfTheTestOnlyIsFoundSizedAndPlanned) {
  RegisterFamily(&kToy);
  RegisterFamily(&kToy);  // once is enough
  int seen = 0;
  for (const Family* f : RegisteredFamilies()) seen += f == &kToy;
  EXPECT_EQ(seen, 1);

  auto c = ParseFamilyConfig(R"({"model_type": "toy_moe",
                                 "num_hidden_layers": 3})",
                             "toy.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(&(*c)->family(), &kToy);
  EXPECT_EQ((*c)->Moe().num_experts, 4);
  // What the pack manifest's checks and the expert workers read of it.
  auto moe = ParseMoeSpec(R"({"model_type": "toy_moe",
                              "num_hidden_layers": 3})",
                          "toy.json");
  ASSERT_TRUE(moe.ok()) << moe.status();
  EXPECT_EQ(moe->num_experts, 4);
  EXPECT_EQ(moe->num_layers, 3);
  auto bad = ParseFamilyConfig(R"({"model_type": "toy_moe"})", "toy.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("num_hidden_layers"));

  const TrunkSizes t = ReleasedTrunkSizes(**c);
  ASSERT_EQ(t.layer_region_bytes.size(), 3u);
  // One BF16 256 x 256 matrix per layer region, padded to 4 KiB.
  EXPECT_EQ(t.layer_region_bytes[0], 256u * 256 * 2);
  EXPECT_EQ(t.vocab_row_bytes, 256 * 2);

  plan::PlanInputs in;
  in.shape = (*c)->Shape();
  in.layer_region_bytes = t.layer_region_bytes;
  in.vocab_region_bytes = t.vocab_region_bytes;
  in.globals_bytes = t.globals_bytes;
  in.expert_run_bytes = t.expert_run_bytes;
  in.max_context = 16;
  in.prefill_chunk = 4;
  // A budget that holds everything pins every layer; with no layer
  // pinned, every layer is read per token through a ring of 3 slots.
  in.budget_bytes = 64ull << 20;
  auto all = plan::MakeMemoryPlan(in);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->pinned_layers, 3);
  EXPECT_EQ(all->trunk_read_bytes, 0u);
  EXPECT_EQ(all->expert_read_bytes, 3u * t.expert_run_bytes);
  in.max_pinned_layers = 0;
  auto streamed = plan::MakeMemoryPlan(in);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_EQ(streamed->pinned_layers, 0);
  EXPECT_EQ(streamed->trunk_read_bytes, 3u * t.layer_region_bytes[0]);
  EXPECT_EQ(streamed->ring_slots, 3);
}

}  // namespace
}  // namespace flotilla::family
