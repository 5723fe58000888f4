#include "shared/family/gpt_oss/gpt_oss_schema.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace flotilla::family::gpt_oss {

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

std::vector<FieldSpec> LayerSchema(const model::GptOssConfig& c, int layer) {
  const std::string p = absl::StrCat("model.layers.", layer, ".");
  const std::string a = p + "self_attn.", m = p + "mlp.";
  const size_t e = c.hidden_size, d = c.head_dim;
  const size_t q = static_cast<size_t>(c.num_attention_heads) * d;
  const size_t kv = static_cast<size_t>(c.num_key_value_heads) * d;
  return {
      Vector("input_norm", p + "input_layernorm.weight", e),
      Vector("post_norm", p + "post_attention_layernorm.weight", e),
      Matrix("q_proj", a + "q_proj.weight", q, e),
      Vector("q_bias", a + "q_proj.bias", q),
      Matrix("k_proj", a + "k_proj.weight", kv, e),
      Vector("k_bias", a + "k_proj.bias", kv),
      Matrix("v_proj", a + "v_proj.weight", kv, e),
      Vector("v_bias", a + "v_proj.bias", kv),
      Matrix("o_proj", a + "o_proj.weight", e, q),
      Vector("o_bias", a + "o_proj.bias", e),
      Vector("sinks", a + "sinks", static_cast<size_t>(c.num_attention_heads)),
      Matrix("router", m + "router.weight", c.num_local_experts, e),
      Vector("router_bias", m + "router.bias", c.num_local_experts),
  };
}

std::vector<FieldSpec> GlobalsSchema(const model::GptOssConfig& c) {
  return {Vector("final_norm", "model.norm.weight", c.hidden_size)};
}

std::vector<FieldSpec> VocabSchema(const model::GptOssConfig& c, bool lm_head) {
  const bool own_head = lm_head && !c.tie_word_embeddings;
  return {Matrix("matrix",
                 own_head ? "lm_head.weight" : "model.embed_tokens.weight",
                 c.vocab_size, c.hidden_size)};
}

}  // namespace flotilla::family::gpt_oss
