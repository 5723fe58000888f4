#include "coordinator/weights.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "shared/base/status_macros.h"

namespace flotilla::coordinator {
namespace {

using model::DType;
using model::K3Config;
using model::TensorInfo;
using model::TensorSource;

constexpr char kModelPrefix[] = "language_model.model.";

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

absl::StatusOr<const TensorInfo*> FindTensor(const TensorSource& source,
                                             const std::string& name) {
  const TensorInfo* info = source.Find(name);
  if (info == nullptr) {
    return absl::NotFoundError(absl::StrCat("missing tensor ", name));
  }
  return info;
}

// Reads a vector with exactly `n` elements (any rank), or, when
// `at_least` is set, at least n elements of which the first n are kept
// (A_log is stored padded to D entries, of which H are used).
absl::StatusOr<std::vector<float>> LoadVector(const TensorSource& source,
                                              const std::string& name,
                                              int64_t n,
                                              bool at_least = false) {
  FLOTILLA_ASSIGN_OR_RETURN(const TensorInfo* info, FindTensor(source, name));
  if (at_least) {
    if (info->numel() < n) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", name, " in ", info->file, " has shape ",
                       ShapeString(info->shape), ", need at least ", n,
                       " elements"));
    }
    FLOTILLA_ASSIGN_OR_RETURN(std::vector<float> v,
                              source.ReadF32(name, info->numel()));
    v.resize(static_cast<size_t>(n));
    return v;
  }
  return source.ReadF32(name, n);
}

float Fold(float a, float b) { return a * b; }

absl::StatusOr<std::vector<float>> LoadFold(const TensorSource& source,
                                            const std::string& norm,
                                            const std::string& proj,
                                            int64_t e) {
  FLOTILLA_ASSIGN_OR_RETURN(std::vector<float> nw, LoadVector(source, norm, e));
  FLOTILLA_ASSIGN_OR_RETURN(std::vector<float> pw, LoadVector(source, proj, e));
  for (size_t i = 0; i < nw.size(); ++i) nw[i] = Fold(nw[i], pw[i]);
  return nw;
}

// Builds W_UK_h^T for every head from kv_b ([Hm*(nope+v)][kv_lora]).
Matrix TransposeKeyHalf(const Matrix& kv_b, const K3Config& c) {
  const size_t heads = c.num_attention_heads, nope = c.qk_nope_head_dim,
               v = c.v_head_dim, lora = c.kv_lora_rank;
  Matrix t;
  t.type = kv_b.type;
  t.rows = heads * lora;
  t.cols = nope;
  if (kv_b.type == kernels::DenseType::kBF16) {
    t.bf16.resize(t.rows * t.cols);
  } else {
    t.f32.resize(t.rows * t.cols);
  }
  for (size_t h = 0; h < heads; ++h) {
    for (size_t i = 0; i < nope; ++i) {
      const size_t src_row = h * (nope + v) + i;
      for (size_t j = 0; j < lora; ++j) {
        const size_t src = src_row * lora + j;
        const size_t dst = (h * lora + j) * nope + i;
        if (kv_b.type == kernels::DenseType::kBF16) {
          t.bf16[dst] = kv_b.bf16[src];
        } else {
          t.f32[dst] = kv_b.f32[src];
        }
      }
    }
  }
  return t;
}

}  // namespace

kernels::DenseMatrix Matrix::view() const { return rows_view(0, rows); }

kernels::DenseMatrix Matrix::rows_view(size_t first, size_t count) const {
  kernels::DenseMatrix m;
  m.type = type;
  m.rows = count;
  m.cols = cols;
  m.data = type == kernels::DenseType::kBF16
               ? static_cast<const void*>(bf16.data() + first * cols)
               : static_cast<const void*>(f32.data() + first * cols);
  return m;
}

void Matrix::RowF32(size_t r, float* out) const {
  if (type == kernels::DenseType::kBF16) {
    const uint16_t* row = bf16.data() + r * cols;
    for (size_t i = 0; i < cols; ++i) out[i] = kernels::Bf16ToF32(row[i]);
  } else {
    std::memcpy(out, f32.data() + r * cols, cols * sizeof(float));
  }
}

size_t ModelWeights::bytes() const {
  size_t total = embed.bytes() + lm_head.bytes();
  for (const LayerWeights& l : layers) {
    for (const Matrix* m :
         {&l.kda.q_proj, &l.kda.k_proj, &l.kda.v_proj, &l.kda.g_proj,
          &l.kda.o_proj, &l.kda.f_a, &l.kda.f_b, &l.kda.b_proj, &l.mla.q_a,
          &l.mla.q_b, &l.mla.kv_a, &l.mla.kv_b, &l.mla.uk_t, &l.mla.o_proj,
          &l.mla.g_proj, &l.dense.gate, &l.dense.up, &l.dense.down,
          &l.moe.router, &l.moe.down, &l.moe.up, &l.moe.shared_gate,
          &l.moe.shared_up, &l.moe.shared_down}) {
      total += m->bytes();
    }
  }
  return total;
}

std::string LayerPrefix(int layer) {
  return absl::StrCat(kModelPrefix, "layers.", layer, ".");
}

absl::StatusOr<Matrix> LoadMatrix(const TensorSource& source,
                                  const std::string& name, size_t rows,
                                  size_t cols) {
  FLOTILLA_ASSIGN_OR_RETURN(const TensorInfo* info, FindTensor(source, name));
  const std::vector<int64_t> want = {static_cast<int64_t>(rows),
                                     static_cast<int64_t>(cols)};
  if (info->shape != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", name, " in ", info->file, " has shape ",
                     ShapeString(info->shape), ", expected ",
                     ShapeString(want)));
  }
  Matrix m;
  m.rows = rows;
  m.cols = cols;
  switch (info->dtype) {
    case DType::kBF16:
      m.type = kernels::DenseType::kBF16;
      m.bf16.resize(rows * cols);
      FLOTILLA_RETURN_IF_ERROR(source.ReadRaw(*info, m.bf16.data()));
      return m;
    case DType::kF32:
    case DType::kF16: {
      m.type = kernels::DenseType::kF32;
      FLOTILLA_ASSIGN_OR_RETURN(
          m.f32, source.ReadF32(name, static_cast<int64_t>(rows * cols)));
      return m;
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", name, " in ", info->file, " has dtype ",
                       model::DTypeName(info->dtype),
                       ", expected BF16, F16 or F32"));
  }
}

absl::StatusOr<KdaWeights> LoadKdaWeights(const TensorSource& source,
                                          const K3Config& c, int layer) {
  const std::string a = LayerPrefix(layer) + "self_attn.";
  const size_t e = c.hidden_size, h = c.kda_num_heads, d = c.kda_head_dim,
               p = h * d, k = c.short_conv_kernel_size;
  KdaWeights w;
  FLOTILLA_ASSIGN_OR_RETURN(w.q_proj, LoadMatrix(source, a + "q_proj.weight", p, e));
  FLOTILLA_ASSIGN_OR_RETURN(w.k_proj, LoadMatrix(source, a + "k_proj.weight", p, e));
  FLOTILLA_ASSIGN_OR_RETURN(w.v_proj, LoadMatrix(source, a + "v_proj.weight", p, e));
  FLOTILLA_ASSIGN_OR_RETURN(w.g_proj, LoadMatrix(source, a + "g_proj.weight", p, e));
  FLOTILLA_ASSIGN_OR_RETURN(w.o_proj, LoadMatrix(source, a + "o_proj.weight", e, p));
  FLOTILLA_ASSIGN_OR_RETURN(w.f_a, LoadMatrix(source, a + "f_a_proj.weight", d, e));
  FLOTILLA_ASSIGN_OR_RETURN(w.f_b, LoadMatrix(source, a + "f_b_proj.weight", p, d));
  FLOTILLA_ASSIGN_OR_RETURN(w.b_proj, LoadMatrix(source, a + "b_proj.weight", h, e));
  FLOTILLA_ASSIGN_OR_RETURN(w.q_conv, LoadVector(source, a + "q_conv1d.weight", p * k));
  FLOTILLA_ASSIGN_OR_RETURN(w.k_conv, LoadVector(source, a + "k_conv1d.weight", p * k));
  FLOTILLA_ASSIGN_OR_RETURN(w.v_conv, LoadVector(source, a + "v_conv1d.weight", p * k));
  FLOTILLA_ASSIGN_OR_RETURN(w.a_log, LoadVector(source, a + "A_log", h, /*at_least=*/true));
  FLOTILLA_ASSIGN_OR_RETURN(w.dt_bias, LoadVector(source, a + "dt_bias", p));
  FLOTILLA_ASSIGN_OR_RETURN(w.o_norm, LoadVector(source, a + "o_norm.weight", d));
  return w;
}

absl::StatusOr<MlaWeights> LoadMlaWeights(const TensorSource& source,
                                          const K3Config& c, int layer) {
  const std::string a = LayerPrefix(layer) + "self_attn.";
  const size_t e = c.hidden_size, hm = c.num_attention_heads,
               ql = c.q_lora_rank, kvl = c.kv_lora_rank,
               nope = c.qk_nope_head_dim, rope = c.qk_rope_head_dim,
               v = c.v_head_dim;
  MlaWeights w;
  FLOTILLA_ASSIGN_OR_RETURN(w.q_a, LoadMatrix(source, a + "q_a_proj.weight", ql, e));
  FLOTILLA_ASSIGN_OR_RETURN(w.q_a_norm, LoadVector(source, a + "q_a_layernorm.weight", ql));
  FLOTILLA_ASSIGN_OR_RETURN(w.q_b, LoadMatrix(source, a + "q_b_proj.weight", hm * (nope + rope), ql));
  FLOTILLA_ASSIGN_OR_RETURN(w.kv_a, LoadMatrix(source, a + "kv_a_proj_with_mqa.weight", kvl + rope, e));
  FLOTILLA_ASSIGN_OR_RETURN(w.kv_a_norm, LoadVector(source, a + "kv_a_layernorm.weight", kvl));
  FLOTILLA_ASSIGN_OR_RETURN(w.kv_b, LoadMatrix(source, a + "kv_b_proj.weight", hm * (nope + v), kvl));
  FLOTILLA_ASSIGN_OR_RETURN(w.o_proj, LoadMatrix(source, a + "o_proj.weight", e, hm * v));
  FLOTILLA_ASSIGN_OR_RETURN(w.g_proj, LoadMatrix(source, a + "g_proj.weight", hm * v, e));
  w.uk_t = TransposeKeyHalf(w.kv_b, c);
  return w;
}

absl::StatusOr<MoeWeights> LoadMoeWeights(const TensorSource& source,
                                          const K3Config& c, int layer) {
  const std::string m = LayerPrefix(layer) + "block_sparse_moe.";
  const size_t e = c.hidden_size, n = c.num_experts,
               l = c.routed_expert_hidden_size,
               shared = static_cast<size_t>(c.moe_intermediate_size) *
                        c.num_shared_experts;
  MoeWeights w;
  FLOTILLA_ASSIGN_OR_RETURN(w.router, LoadMatrix(source, m + "gate.weight", n, e));
  FLOTILLA_ASSIGN_OR_RETURN(w.bias, LoadVector(source, m + "gate.e_score_correction_bias", n));
  FLOTILLA_ASSIGN_OR_RETURN(w.down, LoadMatrix(source, m + "routed_expert_down_proj.weight", l, e));
  FLOTILLA_ASSIGN_OR_RETURN(w.up, LoadMatrix(source, m + "routed_expert_up_proj.weight", e, l));
  if (c.latent_moe_use_norm) {
    FLOTILLA_ASSIGN_OR_RETURN(w.latent_norm, LoadVector(source, m + "routed_expert_norm.weight", l));
  }
  if (shared > 0) {
    FLOTILLA_ASSIGN_OR_RETURN(w.shared_gate, LoadMatrix(source, m + "shared_experts.gate_proj.weight", shared, e));
    FLOTILLA_ASSIGN_OR_RETURN(w.shared_up, LoadMatrix(source, m + "shared_experts.up_proj.weight", shared, e));
    FLOTILLA_ASSIGN_OR_RETURN(w.shared_down, LoadMatrix(source, m + "shared_experts.down_proj.weight", e, shared));
  }
  return w;
}

absl::StatusOr<LayerWeights> LoadLayerWeights(const TensorSource& source,
                                              const K3Config& c, int layer) {
  const std::string lp = LayerPrefix(layer);
  const int64_t e = c.hidden_size;
  LayerWeights w;
  w.is_mla = c.IsMlaLayer(layer);
  w.is_dense = c.IsDenseLayer(layer);
  FLOTILLA_ASSIGN_OR_RETURN(w.input_norm, LoadVector(source, lp + "input_layernorm.weight", e));
  FLOTILLA_ASSIGN_OR_RETURN(w.post_norm, LoadVector(source, lp + "post_attention_layernorm.weight", e));
  FLOTILLA_ASSIGN_OR_RETURN(w.attn_res_fold, LoadFold(source, lp + "self_attention_res_norm.weight", lp + "self_attention_res_proj.weight", e));
  FLOTILLA_ASSIGN_OR_RETURN(w.mlp_res_fold, LoadFold(source, lp + "mlp_res_norm.weight", lp + "mlp_res_proj.weight", e));
  if (w.is_mla) {
    FLOTILLA_ASSIGN_OR_RETURN(w.mla, LoadMlaWeights(source, c, layer));
  } else {
    FLOTILLA_ASSIGN_OR_RETURN(w.kda, LoadKdaWeights(source, c, layer));
  }
  if (w.is_dense) {
    const size_t i = c.intermediate_size;
    FLOTILLA_ASSIGN_OR_RETURN(w.dense.gate, LoadMatrix(source, lp + "mlp.gate_proj.weight", i, e));
    FLOTILLA_ASSIGN_OR_RETURN(w.dense.up, LoadMatrix(source, lp + "mlp.up_proj.weight", i, e));
    FLOTILLA_ASSIGN_OR_RETURN(w.dense.down, LoadMatrix(source, lp + "mlp.down_proj.weight", e, i));
  } else {
    FLOTILLA_ASSIGN_OR_RETURN(w.moe, LoadMoeWeights(source, c, layer));
  }
  return w;
}

absl::StatusOr<ModelWeights> LoadModelWeights(const TensorSource& source,
                                              const K3Config& c) {
  ModelWeights w;
  const size_t v = c.vocab_size, e = c.hidden_size;
  FLOTILLA_ASSIGN_OR_RETURN(w.embed, LoadMatrix(source, std::string(kModelPrefix) + "embed_tokens.weight", v, e));
  FLOTILLA_ASSIGN_OR_RETURN(w.lm_head, LoadMatrix(source, "language_model.lm_head.weight", v, e));
  FLOTILLA_ASSIGN_OR_RETURN(w.final_norm, LoadVector(source, std::string(kModelPrefix) + "norm.weight", e));
  FLOTILLA_ASSIGN_OR_RETURN(w.out_res_fold, LoadFold(source, std::string(kModelPrefix) + "output_attn_res_norm.weight", std::string(kModelPrefix) + "output_attn_res_proj.weight", e));
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    FLOTILLA_ASSIGN_OR_RETURN(LayerWeights lw, LoadLayerWeights(source, c, layer));
    w.layers.push_back(std::move(lw));
  }
  return w;
}

}  // namespace flotilla::coordinator
