#include "shared/family/deepseek_v3/deepseek_v3_schema.h"

#include "absl/strings/str_cat.h"
#include "shared/kernels/fp8.h"

namespace flotilla::family::deepseek_v3 {

using pack::FieldKind;
using pack::FieldSpec;
namespace {

FieldSpec Vector(const char* field, std::string src, size_t n) {
  return FieldSpec{field, FieldKind::kVector, std::move(src), "", n, 0};
}

// A projection [rows][cols]: as stored when the checkpoint is not FP8, else
// its codes and its block scales ([ceil(rows/128)][ceil(cols/128)] F32).
void Projection(const model::DeepSeekV3Config& c, const std::string& field,
                const std::string& src, size_t rows, size_t cols,
                std::vector<FieldSpec>* out) {
  if (!c.fp8) {
    out->push_back(FieldSpec{field, FieldKind::kMatrix, src, "", rows, cols});
    return;
  }
  const std::string scale = field + kScaleSuffix;
  out->push_back(
      FieldSpec{field, FieldKind::kFp8Matrix, src, scale, rows, cols});
  const int64_t b = static_cast<int64_t>(kernels::kFp8Block);
  const int64_t sr = (static_cast<int64_t>(rows) + b - 1) / b;
  const int64_t sc = (static_cast<int64_t>(cols) + b - 1) / b;
  out->push_back(FieldSpec{scale,
                           FieldKind::kVector,
                           src + "_scale_inv",
                           "",
                           static_cast<size_t>(sr * sc),
                           0,
                           {sr, sc}});
}

}  // namespace

std::vector<FieldSpec> LayerSchema(const model::DeepSeekV3Config& c,
                                   int layer) {
  const std::string p = absl::StrCat("model.layers.", layer, ".");
  const std::string a = p + "self_attn.";
  const size_t e = c.hidden_size, heads = c.num_attention_heads;
  const size_t qk = c.qk_head_dim(), kvl = c.kv_lora_rank;
  std::vector<FieldSpec> s = {
      Vector("input_norm", p + "input_layernorm.weight", e),
      Vector("post_norm", p + "post_attention_layernorm.weight", e),
  };
  if (c.q_lora_rank > 0) {
    const size_t ql = c.q_lora_rank;
    Projection(c, "q_a_proj", a + "q_a_proj.weight", ql, e, &s);
    s.push_back(Vector("q_a_norm", a + "q_a_layernorm.weight", ql));
    Projection(c, "q_b_proj", a + "q_b_proj.weight", heads * qk, ql, &s);
  } else {
    Projection(c, "q_proj", a + "q_proj.weight", heads * qk, e, &s);
  }
  Projection(c, "kv_a_proj", a + "kv_a_proj_with_mqa.weight",
             kvl + c.qk_rope_head_dim, e, &s);
  s.push_back(Vector("kv_a_norm", a + "kv_a_layernorm.weight", kvl));
  Projection(c, "kv_b_proj", a + "kv_b_proj.weight",
             heads * (c.qk_nope_head_dim + c.v_head_dim), kvl, &s);
  Projection(c, "o_proj", a + "o_proj.weight", e, heads * c.v_head_dim, &s);
  const std::string m = p + "mlp.";
  if (!c.IsMoeLayer(layer)) {
    const size_t i = c.intermediate_size;
    Projection(c, "gate_proj", m + "gate_proj.weight", i, e, &s);
    Projection(c, "up_proj", m + "up_proj.weight", i, e, &s);
    Projection(c, "down_proj", m + "down_proj.weight", e, i, &s);
    return s;
  }
  s.push_back(FieldSpec{"router", FieldKind::kMatrix, m + "gate.weight", "",
                        static_cast<size_t>(c.n_routed_experts), e});
  s.push_back(Vector("router_bias", m + "gate.e_score_correction_bias",
                     c.n_routed_experts));
  if (c.n_shared_experts > 0) {
    const size_t i =
        static_cast<size_t>(c.moe_intermediate_size) * c.n_shared_experts;
    const std::string sh = m + "shared_experts.";
    Projection(c, "shared_gate", sh + "gate_proj.weight", i, e, &s);
    Projection(c, "shared_up", sh + "up_proj.weight", i, e, &s);
    Projection(c, "shared_down", sh + "down_proj.weight", e, i, &s);
  }
  return s;
}

std::vector<FieldSpec> GlobalsSchema(const model::DeepSeekV3Config& c) {
  return {Vector("final_norm", "model.norm.weight", c.hidden_size)};
}

std::vector<FieldSpec> VocabSchema(const model::DeepSeekV3Config& c,
                                   bool lm_head) {
  const bool own_head = lm_head && !c.tie_word_embeddings;
  return {FieldSpec{"matrix", FieldKind::kMatrix,
                    own_head ? "lm_head.weight" : "model.embed_tokens.weight",
                    "", static_cast<size_t>(c.vocab_size),
                    static_cast<size_t>(c.hidden_size)}};
}

}  // namespace flotilla::family::deepseek_v3
