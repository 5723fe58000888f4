#include "shared/family/qwen3_moe/qwen3_moe_schema.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace flotilla::family::qwen3_moe {

using pack::FieldKind;
using pack::FieldSpec;
namespace {

FieldSpec Matrix(const char* field, std::string src, size_t rows, size_t cols) {
  return FieldSpec{field, FieldKind::kMatrix, std::move(src), "", rows, cols};
}
FieldSpec Vector(const char* field, std::string src, size_t n) {
  return FieldSpec{field, FieldKind::kVector, std::move(src), "", n, 0};
}

}  // namespace

std::vector<FieldSpec> LayerSchema(const model::Qwen3MoeConfig& c, int layer) {
  const std::string p = absl::StrCat("model.layers.", layer, ".");
  const std::string a = p + "self_attn.", m = p + "mlp.";
  const size_t e = c.hidden_size, d = c.head_dim;
  const size_t q = static_cast<size_t>(c.num_attention_heads) * d;
  const size_t kv = static_cast<size_t>(c.num_key_value_heads) * d;
  std::vector<FieldSpec> s = {
      Vector("input_norm", p + "input_layernorm.weight", e),
      Vector("post_norm", p + "post_attention_layernorm.weight", e),
      Matrix("q_proj", a + "q_proj.weight", q, e),
      Matrix("k_proj", a + "k_proj.weight", kv, e),
      Matrix("v_proj", a + "v_proj.weight", kv, e),
      Matrix("o_proj", a + "o_proj.weight", e, q),
      Vector("q_norm", a + "q_norm.weight", d),
      Vector("k_norm", a + "k_norm.weight", d),
  };
  if (c.IsMoeLayer(layer)) {
    s.push_back(Matrix("router", m + "gate.weight", c.num_experts, e));
  } else {
    const size_t i = c.intermediate_size;
    s.push_back(Matrix("gate_proj", m + "gate_proj.weight", i, e));
    s.push_back(Matrix("up_proj", m + "up_proj.weight", i, e));
    s.push_back(Matrix("down_proj", m + "down_proj.weight", e, i));
  }
  return s;
}

std::vector<FieldSpec> GlobalsSchema(const model::Qwen3MoeConfig& c) {
  return {Vector("final_norm", "model.norm.weight", c.hidden_size)};
}

std::vector<FieldSpec> VocabSchema(const model::Qwen3MoeConfig& c,
                                   bool lm_head) {
  const bool own_head = lm_head && !c.tie_word_embeddings;
  return {Matrix("matrix",
                 own_head ? "lm_head.weight" : "model.embed_tokens.weight",
                 c.vocab_size, c.hidden_size)};
}

}  // namespace flotilla::family::qwen3_moe
