#include "tools/synth_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "shared/model/tensor_names.h"

namespace flotilla::tools {
namespace {

using model::DType;
using model::K3Config;

constexpr char kPrefix[] = "language_model.model.";

// Value scales. Matrices get std 1/sqrt(fan_in) (uniform half-width
// sqrt(3/fan_in)) so that y = W x keeps the RMS of a normalised x: every
// projection in K3 reads an RMS-normalised or bounded input, so activations
// stay O(1) through any number of layers. The embedding gets std 1 (it
// enters the residual stream directly); norms are 1 +- 0.1 so they are not
// exact identities; the AttnRes projections give scores of std ~1 so the
// softmax over sources is neither uniform nor one-hot.
constexpr float kNormJitter = 0.1f;
constexpr float kDtBiasHalfWidth = 0.1f;
constexpr float kRouterBiasHalfWidth = 0.01f;

float UniformForStd(double std) {
  return static_cast<float>(std::sqrt(3.0) * std);
}

class Builder {
 public:
  explicit Builder(std::vector<SynthTensor>* out) : out_(out) {}

  // W[rows][cols] (fan_in = cols), BF16.
  void Matrix(const std::string& name, int64_t rows, int64_t cols) {
    Uniform(name, DType::kBF16, {rows, cols}, 0,
            UniformForStd(1.0 / std::sqrt(static_cast<double>(cols))));
  }
  void Norm(const std::string& name, int64_t n) {
    Uniform(name, DType::kF32, {n}, 1.0f, kNormJitter);
  }
  // AttnRes projection [1, E]: folded with its norm into a dot product over
  // E normalised entries.
  void ResProj(const std::string& name, int64_t e) {
    Uniform(name, DType::kF32, {1, e}, 0,
            UniformForStd(1.0 / std::sqrt(static_cast<double>(e))));
  }
  void Uniform(const std::string& name, DType dtype, std::vector<int64_t> shape,
               float center, float half_width) {
    SynthTensor t;
    t.name = name;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.center = center;
    t.half_width = half_width;
    Add(std::move(t));
  }
  void Add(SynthTensor t) { out_->push_back(std::move(t)); }
  void Mxfp4(const std::string& base, int64_t rows, int64_t cols) {
    SynthTensor packed;
    packed.name = base + "weight_packed";
    packed.dtype = DType::kU8;
    packed.shape = {rows, cols / 2};
    packed.init = SynthInit::kMxfp4Packed;
    SynthTensor scale;
    scale.name = base + "weight_scale";
    scale.dtype = DType::kU8;
    scale.shape = {rows, cols / 32};
    scale.init = SynthInit::kMxfp4Scale;
    scale.scale_base = Mxfp4ScaleBase(cols);
    out_->push_back(std::move(packed));
    out_->push_back(std::move(scale));
  }

 private:
  std::vector<SynthTensor>* out_;
};

void AddKda(Builder& b, const std::string& a, const K3Config& c) {
  const int64_t e = c.hidden_size, h = c.kda_num_heads, d = c.kda_head_dim,
                p = h * d, k = c.short_conv_kernel_size;
  for (const char* m : {"q", "k", "v", "g"}) {
    b.Matrix(absl::StrCat(a, m, "_proj.weight"), p, e);
  }
  b.Matrix(a + "o_proj.weight", e, p);
  b.Matrix(a + "f_a_proj.weight", d, e);
  b.Matrix(a + "f_b_proj.weight", p, d);
  b.Matrix(a + "b_proj.weight", h, e);
  for (const char* m : {"q", "k", "v"}) {
    b.Uniform(absl::StrCat(a, m, "_conv1d.weight"), DType::kF32, {p, 1, k}, 0,
              UniformForStd(1.0 / std::sqrt(static_cast<double>(k))));
  }
  // The release stores A_log with D entries of which the first H are used;
  // keep room for H when a config has more heads than head_dim.
  SynthTensor a_log;
  a_log.name = a + "A_log";
  a_log.shape = {std::max(d, h)};
  a_log.init = SynthInit::kALog;
  a_log.used = h;
  b.Add(std::move(a_log));
  b.Uniform(a + "dt_bias", DType::kF32, {p}, 0, kDtBiasHalfWidth);
  b.Norm(a + "o_norm.weight", d);
}

void AddMla(Builder& b, const std::string& a, const K3Config& c) {
  const int64_t e = c.hidden_size, hm = c.num_attention_heads,
                ql = c.q_lora_rank, kvl = c.kv_lora_rank,
                nope = c.qk_nope_head_dim, rope = c.qk_rope_head_dim,
                v = c.v_head_dim;
  b.Matrix(a + "q_a_proj.weight", ql, e);
  b.Norm(a + "q_a_layernorm.weight", ql);
  b.Matrix(a + "q_b_proj.weight", hm * (nope + rope), ql);
  b.Matrix(a + "kv_a_proj_with_mqa.weight", kvl + rope, e);
  b.Norm(a + "kv_a_layernorm.weight", kvl);
  b.Matrix(a + "kv_b_proj.weight", hm * (nope + v), kvl);
  b.Matrix(a + "o_proj.weight", e, hm * v);
  b.Matrix(a + "g_proj.weight", hm * v, e);
}

// One layer's non-expert tensors, sorted by name like the reference
// generator's shards.
std::vector<SynthTensor> LayerTrunk(const K3Config& c, int layer) {
  std::vector<SynthTensor> t;
  Builder b(&t);
  const std::string lp = absl::StrCat(kPrefix, "layers.", layer, ".");
  const int64_t e = c.hidden_size;
  b.Norm(lp + "input_layernorm.weight", e);
  b.Norm(lp + "post_attention_layernorm.weight", e);
  b.Norm(lp + "self_attention_res_norm.weight", e);
  b.Norm(lp + "mlp_res_norm.weight", e);
  b.ResProj(lp + "self_attention_res_proj.weight", e);
  b.ResProj(lp + "mlp_res_proj.weight", e);
  if (c.IsMlaLayer(layer)) {
    AddMla(b, lp + "self_attn.", c);
  } else {
    AddKda(b, lp + "self_attn.", c);
  }
  if (c.IsDenseLayer(layer)) {
    const int64_t i = c.intermediate_size;
    b.Matrix(lp + "mlp.gate_proj.weight", i, e);
    b.Matrix(lp + "mlp.up_proj.weight", i, e);
    b.Matrix(lp + "mlp.down_proj.weight", e, i);
  } else {
    const std::string m = lp + "block_sparse_moe.";
    const int64_t n = c.num_experts, l = c.routed_expert_hidden_size,
                  sh = static_cast<int64_t>(c.moe_intermediate_size) *
                       c.num_shared_experts;
    b.Matrix(m + "gate.weight", n, e);  // router, BF16 as in the release
    b.Uniform(m + "gate.e_score_correction_bias", DType::kF32, {n}, 0,
              kRouterBiasHalfWidth);
    b.Matrix(m + "routed_expert_down_proj.weight", l, e);
    b.Matrix(m + "routed_expert_up_proj.weight", e, l);
    b.Norm(m + "routed_expert_norm.weight", l);
    if (sh > 0) {
      b.Matrix(m + "shared_experts.gate_proj.weight", sh, e);
      b.Matrix(m + "shared_experts.up_proj.weight", sh, e);
      b.Matrix(m + "shared_experts.down_proj.weight", e, sh);
    }
  }
  std::sort(t.begin(), t.end(), [](const SynthTensor& x, const SynthTensor& y) {
    return x.name < y.name;
  });
  return t;
}

// Experts in index order, each as w1, w2, w3 (packed then scale): one
// contiguous byte run per expert, as in the release.
void AddExperts(const K3Config& c, int layer, std::vector<SynthTensor>* out) {
  if (c.IsDenseLayer(layer)) return;
  Builder b(out);
  const int64_t l = c.routed_expert_hidden_size, i = c.moe_intermediate_size;
  const model::ExpertNaming names = c.Moe().expert_names;
  for (int x = 0; x < c.num_experts; ++x) {
    // gate w1 [I][latent], down w2 [latent][I], up w3 [I][latent].
    b.Mxfp4(model::ExpertMatrixPrefix(names, layer, x, 0), i, l);
    b.Mxfp4(model::ExpertMatrixPrefix(names, layer, x, 1), l, i);
    b.Mxfp4(model::ExpertMatrixPrefix(names, layer, x, 2), i, l);
  }
}

std::vector<SynthTensor> ModelLevel(const K3Config& c) {
  std::vector<SynthTensor> t;
  Builder b(&t);
  const int64_t v = c.vocab_size, e = c.hidden_size;
  b.Uniform(std::string(kPrefix) + "embed_tokens.weight", DType::kBF16, {v, e},
            0, UniformForStd(1.0));
  b.Matrix("language_model.lm_head.weight", v, e);
  b.Norm(std::string(kPrefix) + "norm.weight", e);
  b.Norm(std::string(kPrefix) + "output_attn_res_norm.weight", e);
  b.ResProj(std::string(kPrefix) + "output_attn_res_proj.weight", e);
  return t;
}

uint64_t Bytes(const std::vector<SynthTensor>& ts) {
  uint64_t n = 0;
  for (const SynthTensor& t : ts) n += t.nbytes();
  return n;
}

}  // namespace

uint64_t SynthTensor::nbytes() const {
  uint64_t n = model::DTypeSize(dtype);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

int Mxfp4ScaleBase(int64_t fan_in) {
  // std(w) = 2^(s-127) * sqrt(8.5625) * sqrt(E[4^delta]) with delta in
  // {-1,0,0,+1} (E = 1.5625); solve std(w) = 1/sqrt(fan_in) for s.
  const double rms = std::sqrt(8.5625 * 1.5625 * static_cast<double>(fan_in));
  const int s = static_cast<int>(std::lround(127.0 - std::log2(rms)));
  return std::clamp(s, 1, 253);  // s + 1 never reaches 255 (NaN)
}

absl::StatusOr<std::vector<SynthShard>> PlanSynthCheckpoint(const K3Config& c,
                                                            int shards) {
  const int layers = c.num_hidden_layers;
  const int units = layers + 1;  // each layer, then the model-level tensors
  if (shards == 0) shards = units;
  if (shards < 1 || shards > units) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard count must be in 1..", units,
                     " (layers + 1) or auto, got ", shards));
  }
  std::vector<uint64_t> unit_bytes(units);
  uint64_t total = 0;
  for (int u = 0; u < units; ++u) {
    std::vector<SynthTensor> t;
    if (u < layers) {
      t = LayerTrunk(c, u);
      AddExperts(c, u, &t);
    } else {
      t = ModelLevel(c);
    }
    unit_bytes[u] = Bytes(t);
    total += unit_bytes[u];
  }
  std::vector<SynthShard> out(shards);
  int s = 0;
  uint64_t cum = 0;
  for (int u = 0; u < units; ++u) {
    std::vector<SynthTensor>& dst = out[s].tensors;
    if (u < layers) {
      std::vector<SynthTensor> trunk = LayerTrunk(c, u);
      dst.insert(dst.end(), trunk.begin(), trunk.end());
      AddExperts(c, u, &dst);
    } else {
      std::vector<SynthTensor> top = ModelLevel(c);
      dst.insert(dst.end(), top.begin(), top.end());
    }
    cum += unit_bytes[u];
    const int units_left = units - 1 - u, shards_left = shards - 1 - s;
    // Close the shard once it reaches its share of the bytes, or when every
    // remaining shard needs one of the remaining units.
    if (shards_left > 0 &&
        (units_left == shards_left ||
         cum >= total / static_cast<uint64_t>(shards) * (s + 1))) {
      ++s;
    }
  }
  for (int i = 0; i < shards; ++i) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", i + 1,
                  shards);
    out[i].file = name;
  }
  return out;
}

}  // namespace flotilla::tools
