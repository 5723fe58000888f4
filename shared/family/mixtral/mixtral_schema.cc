#include "shared/family/mixtral/mixtral_schema.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace flotilla::family::mixtral {

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

std::vector<FieldSpec> LayerSchema(const model::MixtralConfig& c, int layer) {
  const std::string p = absl::StrCat("model.layers.", layer, ".");
  const size_t e = c.hidden_size, d = c.head_dim;
  const size_t q = c.num_attention_heads * d, kv = c.num_key_value_heads * d;
  return {
      Vector("input_norm", p + "input_layernorm.weight", e),
      Vector("post_norm", p + "post_attention_layernorm.weight", e),
      Matrix("q_proj", p + "self_attn.q_proj.weight", q, e),
      Matrix("k_proj", p + "self_attn.k_proj.weight", kv, e),
      Matrix("v_proj", p + "self_attn.v_proj.weight", kv, e),
      Matrix("o_proj", p + "self_attn.o_proj.weight", e, q),
      Matrix("router", p + "block_sparse_moe.gate.weight", c.num_local_experts,
             e),
  };
}

std::vector<FieldSpec> GlobalsSchema(const model::MixtralConfig& c) {
  return {Vector("final_norm", "model.norm.weight", c.hidden_size)};
}

std::vector<FieldSpec> VocabSchema(const model::MixtralConfig& c,
                                   bool lm_head) {
  const bool own_head = lm_head && !c.tie_word_embeddings;
  return {Matrix("matrix",
                 own_head ? "lm_head.weight" : "model.embed_tokens.weight",
                 c.vocab_size, c.hidden_size)};
}

}  // namespace flotilla::family::mixtral
