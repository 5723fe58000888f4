#include "coordinator/families/kimi_k3/mla.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "shared/kernels/kernels.h"

namespace flotilla::coordinator {

void MlaForwardRows(const MlaWeights& w, const model::K3Config& c,
                    const float* x, const std::vector<size_t>& offsets,
                    const std::vector<MlaCache*>& caches, float* out,
                    kernels::ThreadPool* pool) {
  const size_t n = offsets.back();
  const size_t hm = c.num_attention_heads, ql = c.q_lora_rank,
               kvl = c.kv_lora_rank, nope = c.qk_nope_head_dim,
               rope = c.qk_rope_head_dim, vd = c.v_head_dim, qh = nope + rope;
  // Projections of every row at once (batch matmuls: each weight read once
  // for all rows); a row's result does not depend on the batch.
  std::vector<float> qa(n * ql), q(n * hm * qh);
  kernels::MatMul(w.q_a.view(), x, n, qa.data(), pool);
  for (size_t t = 0; t < n; ++t) {
    kernels::RmsNorm(qa.data() + t * ql, w.q_a_norm.data(), ql, c.rms_norm_eps,
                     qa.data() + t * ql);
  }
  kernels::MatMul(w.q_b.view(), qa.data(), n, q.data(), pool);
  std::vector<float> kva(n * (kvl + rope));
  kernels::MatMul(w.kv_a.view(), x, n, kva.data(), pool);
  // Output gate.
  std::vector<float> gate(n * hm * vd);
  if (c.mla_use_output_gate) {
    kernels::MatMul(w.g_proj.view(), x, n, gate.data(), pool);
    for (float& g : gate) g = kernels::Sigmoid(g);
  } else {
    std::fill(gate.begin(), gate.end(), 1.0f);
  }

  const double scale = 1.0 / std::sqrt(static_cast<double>(qh));
  std::vector<float> attn(n * hm * vd);
  for (size_t seq = 0; seq < caches.size(); ++seq) {
    MlaCache* cache = caches[seq];
    const size_t first = offsets[seq], count = offsets[seq + 1] - first;
    // The sequence's new cache entries.
    const size_t start = cache->positions;
    cache->c_kv.resize((start + count) * kvl);
    cache->k_rope.resize((start + count) * rope);
    for (size_t i = 0; i < count; ++i) {
      const float* row = kva.data() + (first + i) * (kvl + rope);
      kernels::RmsNorm(row, w.kv_a_norm.data(), kvl, c.rms_norm_eps,
                       cache->c_kv.data() + (start + i) * kvl);
      std::memcpy(cache->k_rope.data() + (start + i) * rope, row + kvl,
                  rope * sizeof(float));
    }
    cache->positions = start + count;
    // Heads are independent; each writes only its own slice of `attn`.
    kernels::ParallelFor(pool, hm, 1, [&](size_t h_begin, size_t h_end) {
      std::vector<float> q_lat(kvl), scores, ctx(kvl);
      std::vector<float> ctx_acc(kvl), latent_dots, rope_dots;
      for (size_t h = h_begin; h < h_end; ++h) {
        const kernels::DenseMatrix uk_t = w.uk_t.rows_view(h * kvl, kvl);
        const kernels::DenseMatrix uv =
            w.kv_b.rows_view(h * (nope + vd) + nope, vd);
        for (size_t i = 0; i < count; ++i) {
          const size_t t = first + i;
          const float* qt = q.data() + (t * hm + h) * qh;
          kernels::MatMul(uk_t, qt, 1, q_lat.data(), nullptr);
          const size_t len = start + i + 1;
          scores.resize(len);
          latent_dots.resize(len);
          rope_dots.resize(len);
          kernels::DotF32Rows(q_lat.data(), cache->c_kv.data(), kvl, len, kvl,
                              latent_dots.data());
          kernels::DotF32Rows(qt + nope, cache->k_rope.data(), rope, len, rope,
                              rope_dots.data());
          for (size_t s = 0; s < len; ++s) {
            const double dot =
                static_cast<double>(latent_dots[s]) + rope_dots[s];
            scores[s] = static_cast<float>(dot * scale);
          }
          kernels::Softmax(scores.data(), len);
          std::fill(ctx_acc.begin(), ctx_acc.end(), 0.0f);
          // Positions in increasing order into each column's running sum.
          kernels::AddWeightedRows(scores.data(), cache->c_kv.data(), kvl, len,
                                   kvl, ctx_acc.data());
          std::copy(ctx_acc.begin(), ctx_acc.end(), ctx.begin());
          float* o = attn.data() + (t * hm + h) * vd;
          kernels::MatMul(uv, ctx.data(), 1, o, nullptr);
          const float* gt = gate.data() + (t * hm + h) * vd;
          for (size_t j = 0; j < vd; ++j) o[j] *= gt[j];
        }
      }
    });
  }
  kernels::MatMul(w.o_proj.view(), attn.data(), n, out, pool);
}

void MlaForward(const MlaWeights& w, const model::K3Config& c, const float* x,
                int steps, MlaCache* cache, float* out,
                kernels::ThreadPool* pool) {
  const size_t n = static_cast<size_t>(steps);
  MlaForwardRows(w, c, x, {0, n}, {cache}, out, pool);
}

}  // namespace flotilla::coordinator
