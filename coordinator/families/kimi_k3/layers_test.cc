// Every model-level op fixture in tests/fixtures/k3/fixtures/ops at the
// manifest tolerance |got - want| <= 1e-5 + 1e-4 |want|.
#include <map>
#include <set>

#include "coordinator/families/kimi_k3/decoder_layer.h"
#include "coordinator/families/kimi_k3/kda.h"
#include "coordinator/families/kimi_k3/mla.h"
#include "coordinator/families/kimi_k3/moe.h"
#include "coordinator/families/kimi_k3/region_binding.h"
#include "coordinator/model/local_experts.h"
#include "gtest/gtest.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/family/kimi_k3/kimi_k3_schema.h"
#include "shared/kernels/kernels.h"
#include "shared/kernels/recurrent.h"
#include "shared/model/tensor_names.h"
#include "shared/pack/region_builder.h"
#include "shared/testing/fixture.h"
#include "shared/testing/flat_f32_source.h"

namespace flotilla::coordinator {
namespace {

using testutil::AllClose;
using testutil::DataPath;
using testutil::JsonTensor;
using testutil::LoadJson;

constexpr double kAbs = 1e-5, kRel = 1e-4;

nlohmann::json Op(const std::string& name) {
  return LoadJson(DataPath("k3/fixtures/ops/" + name + ".json"));
}

model::K3Config ManifestConfig() {
  const nlohmann::json m = Op("MANIFEST");
  EXPECT_EQ(m["tolerance"]["fp32_abs"].get<double>(), kAbs);
  EXPECT_EQ(m["tolerance"]["fp32_rel"].get<double>(), kRel);
  auto config = model::ParseK3Config(m["config"].dump(), "MANIFEST.json");
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

// A region built from `source` for `layer`, and the weights bound into it.
struct BoundLayer {
  pack::Region region;
  LayerWeights weights;
};

std::unique_ptr<BoundLayer> Bind(const model::TensorSource& source,
                                 const model::K3Config& c, int layer,
                                 int parts) {
  auto region = family::kimi_k3::BuildLayerRegion(source, c, layer, parts);
  EXPECT_TRUE(region.ok()) << region.status();
  if (!region.ok()) return nullptr;
  auto b = std::make_unique<BoundLayer>();
  b->region = std::move(*region);
  auto w = BindLayer(b->region.layout, b->region.bytes.data(), c, layer, parts);
  EXPECT_TRUE(w.ok()) << w.status();
  if (!w.ok()) return nullptr;
  b->weights = *w;
  return b;
}

// Puts every tensor of a fixture whose name FlatLayerNameToHf knows into a
// memory source, under layer `layer`; `prefix` is prepended to fixture keys.
model::MemoryTensorSource SourceFromFixture(const nlohmann::json& j,
                                            const std::string& prefix,
                                            int layer, bool dense) {
  model::MemoryTensorSource source;
  for (const auto& [key, value] : j.items()) {
    if (!value.is_object() || !value.contains("data")) continue;
    const std::string hf = model::FlatLayerNameToHf(prefix + key, layer, dense);
    if (hf.empty()) continue;
    std::vector<int64_t> shape;
    std::vector<float> data = JsonTensor(j, key, &shape);
    source.Add(hf, shape, std::move(data));
  }
  return source;
}

TEST(LayersTest, ShortConvWithCarriedState) {
  const nlohmann::json j = Op("shortconv");
  const int k = j["kernel"], c = j["channels"];
  const std::vector<float> w = JsonTensor(j, "weight");
  const std::vector<float> in = JsonTensor(j, "in");
  const int steps = static_cast<int>(in.size()) / c;
  std::vector<float> state(c * (k - 1), 0.0f), out(in.size());
  ShortConvSilu(w.data(), k, c, in.data(), steps, state.data(), out.data());
  EXPECT_TRUE(AllClose(out, JsonTensor(j, "out"), kAbs, kRel));
  EXPECT_TRUE(AllClose(state, JsonTensor(j, "state_after"), kAbs, kRel));
  const std::vector<float> in_next = JsonTensor(j, "in_next");
  std::vector<float> out_next(c);
  ShortConvSilu(w.data(), k, c, in_next.data(), 1, state.data(),
                out_next.data());
  EXPECT_TRUE(AllClose(out_next, JsonTensor(j, "out_next"), kAbs, kRel));
}

TEST(LayersTest, KdaDecayIndexesALogPerHead) {
  const nlohmann::json j = Op("kda_decay");
  const std::vector<float> z = JsonTensor(j, "z");
  std::vector<int64_t> gshape;
  const std::vector<float> want_g = JsonTensor(j, "g", &gshape);
  const int heads = gshape[2], dim = gshape[3];
  const int p = heads * dim, steps = z.size() / p;
  std::vector<float> g(z.size()), alpha(z.size());
  for (int t = 0; t < steps; ++t) {
    KdaDecay(z.data() + t * p, JsonTensor(j, "A_log").data(),
             JsonTensor(j, "dt_bias").data(), j["lower_bound"], heads, dim,
             g.data() + t * p, alpha.data() + t * p);
  }
  EXPECT_TRUE(AllClose(g, want_g, kAbs, kRel));
  EXPECT_TRUE(AllClose(alpha, JsonTensor(j, "alpha"), kAbs, kRel));
}

void CheckRecurrence(const std::string& name) {
  const nlohmann::json j = Op(name);
  const int steps = j["T"], heads = j["H"], dim = j["d_k"];
  const float q_scale = j["q_scale"];
  std::vector<float> q = JsonTensor(j, "q");
  const std::vector<float> k = JsonTensor(j, "k"), v = JsonTensor(j, "v"),
                           alpha = JsonTensor(j, "alpha"),
                           beta = JsonTensor(j, "beta");
  for (float& x : q) x *= q_scale;
  const int p = heads * dim;
  std::vector<float> state(heads * dim * dim, 0.0f), out(steps * p);
  for (int t = 0; t < steps; ++t) {
    kernels::KdaRecurrentStep(state.data(), q.data() + t * p, k.data() + t * p,
                              v.data() + t * p, alpha.data() + t * p,
                              beta.data() + t * heads, heads, dim,
                              out.data() + t * p);
  }
  EXPECT_TRUE(AllClose(out, JsonTensor(j, "out"), kAbs, kRel)) << name;
  EXPECT_TRUE(AllClose(state, JsonTensor(j, "state_out"), kAbs, kRel)) << name;
}

TEST(LayersTest, KdaRecurrenceOneStep) { CheckRecurrence("kda_recur1"); }
TEST(LayersTest, KdaRecurrenceEightSteps) { CheckRecurrence("kda_recur8"); }

void CheckKdaLayer(const std::string& name) {
  const nlohmann::json j = Op(name);
  model::K3Config c = ManifestConfig();
  const int steps = j["T"], p = c.kda_num_heads * c.kda_head_dim,
            e = c.hidden_size, d = c.kda_head_dim, h = c.kda_num_heads;
  // The fixture names module attributes; map them to checkpoint names.
  model::MemoryTensorSource source;
  const std::string a = model::LayerPrefix(1) + "self_attn.";
  for (const auto& [key, value] : j.items()) {
    if (!value.is_object() || !value.contains("data")) continue;
    std::string hf = key + ".weight";
    if (key == "A_log" || key == "dt_bias") hf = key;
    if (key == "f_a" || key == "f_b") hf = key + "_proj.weight";
    if (key.size() > 5 && key.substr(key.size() - 5) == "_conv") {
      hf = key + "1d.weight";
    }
    std::vector<int64_t> shape;
    std::vector<float> data = JsonTensor(j, key, &shape);
    source.Add(a + hf, shape, std::move(data));
  }
  auto bound = Bind(source, c, 1, pack::kAttentionPart);
  ASSERT_NE(bound, nullptr);
  const KdaWeights& w = bound->weights.kda;
  (void)p;
  (void)d;
  (void)h;
  KdaState state;
  InitKdaState(c, &state);
  const std::vector<float> in = JsonTensor(j, "in");
  std::vector<float> out(steps * e);
  KdaForward(w, c, in.data(), steps, &state, out.data(), nullptr);
  EXPECT_TRUE(AllClose(out, JsonTensor(j, "out"), kAbs, kRel)) << name;
  EXPECT_TRUE(AllClose(state.s, JsonTensor(j, "state_out"), kAbs, kRel))
      << name;
}

TEST(LayersTest, KdaLayerOneToken) { CheckKdaLayer("kda_layer1"); }
TEST(LayersTest, KdaLayerEightTokens) { CheckKdaLayer("kda_layer8"); }

TEST(LayersTest, RouterSelectsWithBiasAndWeighsWithoutIt) {
  const nlohmann::json j = Op("router");
  const int k = j["top_k"], n = j["n_experts"];
  std::vector<int64_t> in_shape;
  const std::vector<float> in = JsonTensor(j, "in", &in_shape);
  const int e = in_shape[1], rows = in_shape[0];
  const std::vector<float> gate_data = JsonTensor(j, "gate_weight");
  ASSERT_EQ(gate_data.size(), static_cast<size_t>(n * e));
  Matrix gate;
  gate.data = gate_data.data();
  gate.rows = n;
  gate.cols = e;
  const std::vector<float> bias = JsonTensor(j, "bias");
  const std::vector<float> want_idx = JsonTensor(j, "topk_idx");
  const std::vector<float> want_w = JsonTensor(j, "topk_weight");
  std::vector<float> logits(rows * n);
  kernels::MatMul(gate.view(), in.data(), rows, logits.data(), nullptr);
  RouterSpec spec;
  spec.scoring = RouterSpec::Scoring::kSigmoid;
  spec.num_experts = n;
  spec.top_k = k;
  spec.renormalize_epsilon = 1e-20;
  std::vector<ExpertTask> tasks;
  Route(spec, logits.data(), bias.data(), rows, &tasks);
  ASSERT_EQ(tasks.size(), static_cast<size_t>(rows * k));
  for (int r = 0; r < rows; ++r) {
    std::map<int, float> got, want;
    for (int i = 0; i < k; ++i) {
      EXPECT_EQ(tasks[r * k + i].row, r);
      got[tasks[r * k + i].expert] = tasks[r * k + i].weight;
      want[static_cast<int>(want_idx[r * k + i])] = want_w[r * k + i];
    }
    ASSERT_EQ(got.size(), want.size());
    for (const auto& [expert, weight] : want) {
      ASSERT_TRUE(got.count(expert)) << "row " << r << " expert " << expert;
      EXPECT_NEAR(got[expert], weight, kAbs + kRel * std::fabs(weight));
    }
  }
}

TEST(LayersTest, AttnResAggregatesRawSources) {
  const nlohmann::json j = Op("attnres");
  std::vector<int64_t> shape;
  const std::vector<float> blocks = JsonTensor(j, "block_residual", &shape);
  const std::vector<float> prefix = JsonTensor(j, "prefix_sum");
  const std::vector<float> norm = JsonTensor(j, "norm_weight"),
                           proj = JsonTensor(j, "proj_weight");
  const size_t tokens = shape[0], nb = shape[1], e = shape[2];
  std::vector<float> fold(e);
  for (size_t i = 0; i < e; ++i) fold[i] = norm[i] * proj[i];
  std::vector<float> out(tokens * e);
  for (size_t t = 0; t < tokens; ++t) {
    std::vector<const float*> src;
    for (size_t b = 0; b < nb; ++b) src.push_back(&blocks[(t * nb + b) * e]);
    src.push_back(&prefix[t * e]);
    AttnResAggregate(src, fold.data(), e, j["eps"], out.data() + t * e);
  }
  EXPECT_TRUE(AllClose(out, JsonTensor(j, "out"), kAbs, kRel));
}

TEST(LayersTest, MlaWithLatentCache) {
  const nlohmann::json j = Op("mla");
  const model::K3Config c = ManifestConfig();
  model::MemoryTensorSource source =
      SourceFromFixture(j, "self_attn_", 3, false);
  auto bound = Bind(source, c, 3, pack::kAttentionPart);
  ASSERT_NE(bound, nullptr);
  const MlaWeights* w = &bound->weights.mla;
  const std::vector<float> in = JsonTensor(j, "in");
  const int steps = in.size() / c.hidden_size;
  MlaCache cache;
  std::vector<float> out(in.size());
  MlaForward(*w, c, in.data(), steps, &cache, out.data(), nullptr);
  EXPECT_TRUE(AllClose(out, JsonTensor(j, "out"), kAbs, kRel));
  EXPECT_TRUE(AllClose(cache.c_kv, JsonTensor(j, "kv_latent"), kAbs, kRel));
  EXPECT_TRUE(AllClose(cache.k_rope, JsonTensor(j, "k_rope"), kAbs, kRel));

  // Token-by-token decode through the cache gives the same outputs.
  MlaCache inc;
  std::vector<float> out_inc(in.size());
  for (int t = 0; t < steps; ++t) {
    MlaForward(*w, c, in.data() + t * c.hidden_size, 1, &inc,
               out_inc.data() + t * c.hidden_size, nullptr);
  }
  EXPECT_TRUE(AllClose(out_inc, JsonTensor(j, "out"), kAbs, kRel));
}

TEST(LayersTest, LatentMoeWithSharedExperts) {
  const nlohmann::json j = Op("moe");
  const model::K3Config c = ManifestConfig();
  model::MemoryTensorSource source = SourceFromFixture(j, "mlp_", 1, false);
  auto bound = Bind(source, c, 1, pack::kFfnPart);
  ASSERT_NE(bound, nullptr);
  const MoeWeights* w = &bound->weights.moe;
  auto experts =
      LocalExperts::Create(&source, c.Moe(), nullptr, /*only_layer=*/1);
  ASSERT_TRUE(experts.ok()) << experts.status();
  const std::vector<float> in = JsonTensor(j, "in");
  const int steps = in.size() / c.hidden_size;
  std::vector<float> out(in.size());
  ASSERT_TRUE(MoeForward(*w, c, 1, in.data(), steps, experts->get(), out.data(),
                         nullptr)
                  .ok());
  EXPECT_TRUE(AllClose(out, JsonTensor(j, "out"), kAbs, kRel));
}

void CheckDecoderLayer(const std::string& name) {
  const nlohmann::json j = Op(name);
  const model::K3Config c = ManifestConfig();
  const int layer = j["layer_idx"];
  model::MemoryTensorSource source = SourceFromFixture(j, "", layer, false);
  auto bound = Bind(source, c, layer, pack::kAllLayerParts);
  ASSERT_NE(bound, nullptr);
  const LayerWeights* w = &bound->weights;
  ASSERT_EQ(w->is_mla, j["is_mla"].get<bool>());
  auto experts = LocalExperts::Create(&source, c.Moe(), nullptr, layer);
  ASSERT_TRUE(experts.ok()) << experts.status();

  std::vector<int64_t> bshape;
  const std::vector<float> blocks_in =
      JsonTensor(j, "block_residual_in", &bshape);
  const size_t tokens = bshape[0], nb = bshape[1], e = bshape[2];
  ResidualStreams s;
  s.steps = tokens;
  s.partial = JsonTensor(j, "in");
  s.blocks.assign(nb, std::vector<float>(tokens * e));
  for (size_t t = 0; t < tokens; ++t) {
    for (size_t b = 0; b < nb; ++b) {
      std::copy_n(&blocks_in[(t * nb + b) * e], e, &s.blocks[b][t * e]);
    }
  }
  KdaState kda;
  InitKdaState(c, &kda);
  MlaCache mla;
  ASSERT_TRUE(
      DecoderLayerForward(*w, c, layer, &s, &kda, &mla, experts->get(), nullptr)
          .ok());
  EXPECT_TRUE(AllClose(s.partial, JsonTensor(j, "out"), kAbs, kRel)) << name;
  std::vector<int64_t> oshape;
  const std::vector<float> blocks_out =
      JsonTensor(j, "block_residual_out", &oshape);
  ASSERT_EQ(static_cast<size_t>(oshape[1]), s.blocks.size());
  std::vector<float> got(blocks_out.size());
  for (size_t t = 0; t < tokens; ++t) {
    for (size_t b = 0; b < s.blocks.size(); ++b) {
      std::copy_n(&s.blocks[b][t * e], e, &got[(t * oshape[1] + b) * e]);
    }
  }
  EXPECT_TRUE(AllClose(got, blocks_out, kAbs, kRel)) << name;
}

TEST(LayersTest, DecoderLayerKda) { CheckDecoderLayer("layer_kda"); }
TEST(LayersTest, DecoderLayerMlaAtBlockBoundary) {
  CheckDecoderLayer("layer_mla");
}

}  // namespace
}  // namespace flotilla::coordinator
