// AVX-512 attention kernels in the float orders of kernels.h, bit-identical
// to kernels_scalar.cc: a score's 32 Dot32 lanes are two __m512 registers
// (lanes 0-15 and 16-31), one FMA per product as the scalar std::fma, tails
// masked so that lanes past the columns receive nothing, folded in the
// scalar tree; a weighted sum keeps one float lane per column and adds the
// rows in order, one FMA each. A block of queries against a block of rows
// goes in tiles (4 queries x 2 keys; 4 queries x 64 columns) so that every
// load serves several FMAs.
//
// No standard-library templates are instantiated here (kernels_internal.h).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "shared/kernels/kernels_internal.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")
#if defined(__clang__)
// Clang ignores the GCC pragma; this gives the functions defined below (and
// only those, not inline library code from the headers above) the ISA.
#pragma clang attribute push(                                               \
    __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma"))), \
    apply_to = function)
#endif
// GCC 12 reports the _mm512_undefined_* placeholders inside its own
// intrinsic headers as maybe-uninitialized (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace flotilla::kernels::internal {
namespace {

inline __mmask16 Mask16(size_t left) {
  return static_cast<__mmask16>(left >= 16 ? 0xffffu : (1u << left) - 1);
}

// The Dot32 tree over lanes 0-15 (a) and 16-31 (b): i += i+16, +8, +4, +2,
// then lane 0 + lane 1.
inline float Fold32(__m512 a, __m512 b) {
  const __m512 v16 = _mm512_add_ps(a, b);
  const __m256 v8 = _mm256_add_ps(_mm512_castps512_ps256(v16),
                                  _mm512_extractf32x8_ps(v16, 1));
  const __m128 v4 =
      _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
  const __m128 v2 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
  return _mm_cvtss_f32(_mm_add_ss(v2, _mm_movehdup_ps(v2)));
}

// The rest of the Dot32 tree for eight pairs at once, from their lanes
// after i += i+16 (s[p] = lanes 0-15 of pair p), as a transpose: each stage
// adds the halves that the scalar tree adds, for two or four pairs per
// instruction. i += i+8: 128-bit chunks 0+2 and 1+3 of pairs 2k and 2k+1;
// i += i+4: chunk 0 + chunk 1 of four pairs; i += i+2 and lane 0 + lane 1
// within the chunks. Pair p < 4 ends in out[4p], pair p >= 4 in
// out[4(p - 4) + 1].
inline void Fold8Pairs(const __m512* s, float* out) {
  __m512 t[4];
  for (int k = 0; k < 4; ++k) {
    t[k] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * k], s[2 * k + 1], 0x44),
                         _mm512_shuffle_f32x4(s[2 * k], s[2 * k + 1], 0xEE));
  }
  __m512 u[2];
  for (int m = 0; m < 2; ++m) {
    u[m] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * m], t[2 * m + 1], 0x88),
                         _mm512_shuffle_f32x4(t[2 * m], t[2 * m + 1], 0xDD));
  }
  const __m512 v = _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], 0x44),
                                 _mm512_shuffle_ps(u[0], u[1], 0xEE));
  _mm512_store_ps(out, _mm512_add_ps(_mm512_shuffle_ps(v, v, 0x88),
                                     _mm512_shuffle_ps(v, v, 0xDD)));
}

// One 32-column step of QN queries against RN rows; kTail masks the loads
// and the FMAs (m0: columns c..c+15, m1: c+16..c+31).
template <int QN, int RN, bool kTail>
inline void ScoreStep(const float* a, size_t a_stride, const float* r,
                      size_t r_stride, size_t c, __mmask16 m0, __mmask16 m1,
                      __m512 (*lo)[RN], __m512 (*hi)[RN]) {
  __m512 rl[RN], rh[RN];
  for (int j = 0; j < RN; ++j) {
    rl[j] = _mm512_maskz_loadu_ps(m0, r + j * r_stride + c);
    rh[j] = _mm512_maskz_loadu_ps(m1, r + j * r_stride + c + 16);
  }
  for (int q = 0; q < QN; ++q) {
    const __m512 ql = _mm512_maskz_loadu_ps(m0, a + q * a_stride + c);
    const __m512 qh = _mm512_maskz_loadu_ps(m1, a + q * a_stride + c + 16);
    for (int j = 0; j < RN; ++j) {
      if (kTail) {
        lo[q][j] = _mm512_mask3_fmadd_ps(ql, rl[j], lo[q][j], m0);
        hi[q][j] = _mm512_mask3_fmadd_ps(qh, rh[j], hi[q][j], m1);
      } else {
        lo[q][j] = _mm512_fmadd_ps(ql, rl[j], lo[q][j]);
        hi[q][j] = _mm512_fmadd_ps(qh, rh[j], hi[q][j]);
      }
    }
  }
}

// QN queries (a_stride apart) against RN rows (r_stride apart) over n
// columns: out[q * out_stride + j].
template <int QN, int RN>
void ScoreTile(const float* a, size_t a_stride, const float* r, size_t r_stride,
               size_t n, float* out, size_t out_stride) {
  __m512 lo[QN][RN], hi[QN][RN];
  for (int q = 0; q < QN; ++q) {
    for (int j = 0; j < RN; ++j) lo[q][j] = hi[q][j] = _mm512_setzero_ps();
  }
  size_t c = 0;
  for (; c + 32 <= n; c += 32) {
    ScoreStep<QN, RN, false>(a, a_stride, r, r_stride, c, 0xffff, 0xffff, lo,
                             hi);
  }
  if (c < n) {
    const size_t left = n - c;
    ScoreStep<QN, RN, true>(a, a_stride, r, r_stride, c, Mask16(left),
                            Mask16(left > 16 ? left - 16 : 0), lo, hi);
  }
  if (QN * RN == 8) {
    __m512 sums[8];
    for (int q = 0; q < QN; ++q) {
      for (int j = 0; j < RN; ++j)
        sums[q * RN + j] = _mm512_add_ps(lo[q][j], hi[q][j]);
    }
    alignas(64) float folded[16];
    Fold8Pairs(sums, folded);
    for (int p = 0; p < 8; ++p) {
      out[(p / RN) * out_stride + p % RN] =
          folded[p < 4 ? 4 * p : 4 * (p - 4) + 1];
    }
    return;
  }
  for (int q = 0; q < QN; ++q) {
    for (int j = 0; j < RN; ++j) {
      out[q * out_stride + j] = Fold32(lo[q][j], hi[q][j]);
    }
  }
}

template <int QN, int RN>
void ScoreRows(const float* a, size_t a_stride, const float* rows,
               size_t stride, size_t count, size_t n, float* out,
               size_t out_stride) {
  size_t j = 0;
  for (; j + RN <= count; j += RN) {
    ScoreTile<QN, RN>(a, a_stride, rows + j * stride, stride, n, out + j,
                      out_stride);
  }
  for (; j < count; ++j) {
    ScoreTile<QN, 1>(a, a_stride, rows + j * stride, stride, n, out + j,
                     out_stride);
  }
}

// QN queries' weights (w[q * w_stride + j]) times the rows, added in row
// order to their accumulators (acc + q * acc_stride), 64 columns (four
// registers) at a time.
template <int QN>
void WeightedTile(const float* w, size_t w_stride, const float* rows,
                  size_t stride, size_t count, size_t n, float* acc,
                  size_t acc_stride) {
  for (size_t c = 0; c < n; c += 64) {
    // Masked lanes load +0.0 and are never stored; the register count is a
    // constant so that the accumulators stay in registers.
    __mmask16 mask[4];
    for (int k = 0; k < 4; ++k) {
      const size_t lo = c + 16 * static_cast<size_t>(k);
      mask[k] = Mask16(lo < n ? n - lo : 0);
    }
    __m512 sum[QN][4];
    for (int q = 0; q < QN; ++q) {
      for (int k = 0; k < 4; ++k) {
        sum[q][k] =
            _mm512_maskz_loadu_ps(mask[k], acc + q * acc_stride + c + 16 * k);
      }
    }
    for (size_t j = 0; j < count; ++j) {
      __m512 v[4];
      for (int k = 0; k < 4; ++k) {
        v[k] = _mm512_maskz_loadu_ps(mask[k], rows + j * stride + c + 16 * k);
      }
      for (int q = 0; q < QN; ++q) {
        const __m512 weight = _mm512_set1_ps(w[q * w_stride + j]);
        for (int k = 0; k < 4; ++k) {
          sum[q][k] = _mm512_fmadd_ps(weight, v[k], sum[q][k]);
        }
      }
    }
    for (int q = 0; q < QN; ++q) {
      for (int k = 0; k < 4; ++k) {
        _mm512_mask_storeu_ps(acc + q * acc_stride + c + 16 * k, mask[k],
                              sum[q][k]);
      }
    }
  }
}

}  // namespace

void DotStridedRowsAvx512(const float* a, const float* rows, size_t stride,
                          size_t count, size_t n, float* out) {
  ScoreRows<1, 4>(a, 0, rows, stride, count, n, out, 0);
}

void AddWeightedRowsAvx512(const float* w, const float* rows, size_t stride,
                           size_t count, size_t n, float* acc) {
  WeightedTile<1>(w, 0, rows, stride, count, n, acc, 0);
}

void DotF32RowsManyAvx512(const float* a, size_t a_stride, size_t a_count,
                          const float* rows, size_t row_stride,
                          size_t row_count, size_t n, float* out,
                          size_t out_stride) {
  size_t q = 0;
  for (; q + 4 <= a_count; q += 4) {
    ScoreRows<4, 2>(a + q * a_stride, a_stride, rows, row_stride, row_count, n,
                    out + q * out_stride, out_stride);
  }
  for (; q < a_count; ++q) {
    ScoreRows<1, 4>(a + q * a_stride, a_stride, rows, row_stride, row_count, n,
                    out + q * out_stride, out_stride);
  }
}

void AddWeightedRowsManyAvx512(const float* w, size_t w_stride, size_t w_count,
                               const float* rows, size_t row_stride,
                               size_t row_count, size_t n, float* acc,
                               size_t acc_stride) {
  size_t q = 0;
  for (; q + 4 <= w_count; q += 4) {
    WeightedTile<4>(w + q * w_stride, w_stride, rows, row_stride, row_count, n,
                    acc + q * acc_stride, acc_stride);
  }
  for (; q < w_count; ++q) {
    WeightedTile<1>(w + q * w_stride, w_stride, rows, row_stride, row_count, n,
                    acc + q * acc_stride, acc_stride);
  }
}

}  // namespace flotilla::kernels::internal

#pragma GCC diagnostic pop
#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options
