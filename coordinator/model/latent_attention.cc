#include "coordinator/model/latent_attention.h"

#include <cmath>
#include <cstring>

#include "shared/kernels/kernels.h"

namespace flotilla::coordinator {
namespace {

// Rotates one rope slice `x` [rope] in place for `position`, in float as
// upstream: angle = position * inv_freq[i], cos and sin times the factor,
// (a, b) -> (a cos - b sin, b cos + a sin).
void Rotate(const LatentAttentionSpec& s, size_t position, float* x) {
  const size_t half = s.qk_rope_dim / 2;
  for (size_t i = 0; i < half; ++i) {
    const float angle = static_cast<float>(position) * s.inv_freq[i];
    const float c = std::cos(angle) * s.rope_factor;
    const float sn = std::sin(angle) * s.rope_factor;
    float& a = x[s.rope_interleaved ? 2 * i : i];
    float& b = x[s.rope_interleaved ? 2 * i + 1 : i + half];
    const float a0 = a, b0 = b;
    a = a0 * c - b0 * sn;
    b = b0 * c + a0 * sn;
  }
}

}  // namespace

void LatentAttention(const LatentAttentionSpec& s,
                     const LatentAttentionWeights& w, const float* x, size_t n,
                     LatentCache* cache, float* out,
                     kernels::ThreadPool* pool) {
  LatentAttentionRows(s, w, x, {0, n}, {cache}, out, pool);
}

void LatentAttentionRows(const LatentAttentionSpec& s,
                         const LatentAttentionWeights& w, const float* x,
                         const std::vector<size_t>& offsets,
                         const std::vector<LatentCache*>& caches, float* out,
                         kernels::ThreadPool* pool) {
  const size_t heads = s.heads, kvl = s.kv_lora_rank, nope = s.qk_nope_dim,
               rope = s.qk_rope_dim, vd = s.v_dim, qh = nope + rope;
  const size_t n = offsets.back();
  // Every sequence's rows through each projection at once (a weight read
  // once per step, not once per sequence). Queries [n][heads][nope | rope].
  std::vector<float> q(n * heads * qh);
  if (s.q_lora_rank > 0) {
    const size_t ql = s.q_lora_rank;
    std::vector<float> qa(n * ql);
    kernels::MatMul(w.q_a, x, n, qa.data(), pool);
    for (size_t t = 0; t < n; ++t) {
      kernels::RmsNorm(qa.data() + t * ql, w.q_a_norm, ql, s.q_norm_eps,
                       qa.data() + t * ql);
    }
    kernels::MatMul(w.q_b, qa.data(), n, q.data(), pool);
  } else {
    kernels::MatMul(w.q_proj, x, n, q.data(), pool);
  }
  // The new positions' latent and shared rope key, into each cache.
  std::vector<float> kva(n * (kvl + rope));
  kernels::MatMul(w.kv_a, x, n, kva.data(), pool);
  std::vector<size_t> start(caches.size());
  for (size_t i = 0; i < caches.size(); ++i) {
    LatentCache* cache = caches[i];
    const size_t r0 = offsets[i], rows = offsets[i + 1] - r0;
    start[i] = cache->positions;
    cache->c_kv.resize((start[i] + rows) * kvl);
    cache->k_rope.resize((start[i] + rows) * rope);
    for (size_t t = 0; t < rows; ++t) {
      const size_t pos = start[i] + t;
      const float* row = kva.data() + (r0 + t) * (kvl + rope);
      kernels::RmsNorm(row, w.kv_a_norm, kvl, s.kv_norm_eps,
                       cache->c_kv.data() + pos * kvl);
      float* k = cache->k_rope.data() + pos * rope;
      std::memcpy(k, row + kvl, rope * sizeof(float));
      Rotate(s, pos, k);
      for (size_t h = 0; h < heads; ++h) {
        Rotate(s, pos, q.data() + ((r0 + t) * heads + h) * qh + nope);
      }
    }
    cache->positions = start[i] + rows;
  }

  std::vector<float> attn(n * heads * vd);
  // Heads are independent; each writes only its own slice of `attn`, for
  // every sequence against that sequence's cache.
  kernels::ParallelFor(pool, heads, 1, [&](size_t h_begin, size_t h_end) {
    std::vector<double> acc(n * kvl);
    std::vector<float> row(kvl), q_lat(n * kvl), scores, ctx(kvl);
    std::vector<float> latent_dots, rope_dots, sum(kvl);
    for (size_t h = h_begin; h < h_end; ++h) {
      const size_t k_row = h * (nope + vd);  // this head's key rows in kv_b
      // q_lat = W_UK^T q_nope for every row of the step (no cache needed):
      // the key half of kv_b, absorbed, each of its rows read once for all.
      std::fill(acc.begin(), acc.end(), 0.0);
      for (size_t c = 0; c < nope; ++c) {
        kernels::RowValues(w.kv_b, k_row + c, row.data());
        for (size_t t = 0; t < n; ++t) {
          const double qc = q[(t * heads + h) * qh + c];
          double* a = acc.data() + t * kvl;
          for (size_t j = 0; j < kvl; ++j) a[j] += qc * row[j];
        }
      }
      for (size_t k = 0; k < n * kvl; ++k) {
        q_lat[k] = static_cast<float>(acc[k]);
      }
      for (size_t i = 0; i < caches.size(); ++i) {
        const LatentCache& cache = *caches[i];
        const size_t r0 = offsets[i], rows = offsets[i + 1] - r0;
        for (size_t t = 0; t < rows; ++t) {
          const float* qt = q.data() + ((r0 + t) * heads + h) * qh;
          const float* lat = q_lat.data() + (r0 + t) * kvl;
          const size_t len = start[i] + t + 1;
          scores.resize(len);
          latent_dots.resize(len);
          rope_dots.resize(len);
          kernels::DotF32Rows(lat, cache.c_kv.data(), kvl, len, kvl,
                              latent_dots.data());
          kernels::DotF32Rows(qt + nope, cache.k_rope.data(), rope, len, rope,
                              rope_dots.data());
          for (size_t p = 0; p < len; ++p) {
            const double dot =
                static_cast<double>(latent_dots[p]) + rope_dots[p];
            scores[p] = static_cast<float>(dot * s.softmax_scale);
          }
          kernels::Softmax(scores.data(), len);
          std::fill(sum.begin(), sum.end(), 0.0f);
          // Positions in increasing order into each column's running sum.
          kernels::AddWeightedRows(scores.data(), cache.c_kv.data(), kvl, len,
                                   kvl, sum.data());
          std::copy(sum.begin(), sum.end(), ctx.begin());
          // The value half of kv_b on the weighted latent.
          kernels::MatVecRows(w.kv_b, k_row + nope, vd, ctx.data(),
                              attn.data() + ((r0 + t) * heads + h) * vd);
        }
      }
    }
  });
  kernels::MatMul(w.o_proj, attn.data(), n, out, pool);
}

}  // namespace flotilla::coordinator
