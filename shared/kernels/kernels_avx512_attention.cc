// AVX-512 kernels for a block of attention queries against a block of cached
// rows (DotF32RowsMany, AddWeightedRowsMany in kernels.h), bit-identical to
// the one-query kernels: every product of two floats is exact in double, and
// each output keeps its Dot16 lanes and fold (scores) or its running sum in
// row order (weighted values). The speed comes from converting each query
// and each row to double once per call, not once per pair, and from tiles
// (4 queries x 2 keys; 4 queries x 32 columns) that reuse every load.
//
// No standard-library templates are instantiated here (kernels_internal.h);
// the caller passes the scratch for the widened rows.
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

// `count` rows of n floats (`stride` apart) widened to double into
// out[i * width + c], zero from n to `width` (a multiple of 32).
void Widen(const float* x, size_t stride, size_t count, size_t n, size_t width,
           double* out) {
  for (size_t i = 0; i < count; ++i) {
    const float* src = x + i * stride;
    double* dst = out + i * width;
    for (size_t c = 0; c < width; c += 16) {
      const size_t left = c < n ? n - c : 0;
      const __mmask16 mask =
          static_cast<__mmask16>(left >= 16 ? 0xffffu : (1u << left) - 1);
      const __m512 v = _mm512_maskz_loadu_ps(mask, src + c);
      _mm512_storeu_pd(dst + c, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
      _mm512_storeu_pd(dst + c + 8,
                       _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
    }
  }
}

// The Dot16 fold of lanes 0-7 (lo) and 8-15 (hi): i += i+8, +4, +2, +1.
inline double Fold16(__m512d lo, __m512d hi) {
  const __m512d v8 = _mm512_add_pd(lo, hi);
  const __m256d v4 =
      _mm256_add_pd(_mm512_castpd512_pd256(v8), _mm512_extractf64x4_pd(v8, 1));
  const __m128d v2 =
      _mm_add_pd(_mm256_castpd256_pd128(v4), _mm256_extractf128_pd(v4, 1));
  return _mm_cvtsd_f64(_mm_add_sd(v2, _mm_unpackhi_pd(v2, v2)));
}

// QN widened queries against RN widened rows (`width` doubles each, zero
// padded: a +0.0 product leaves a Dot16 lane as it is, lanes never being
// -0.0); out[q * out_stride + j].
template <int QN, int RN>
void ScoreTile(const double* a, const double* r, size_t width, double* out,
               size_t out_stride) {
  __m512d lo[QN][RN], hi[QN][RN];
  for (int q = 0; q < QN; ++q) {
    for (int j = 0; j < RN; ++j) lo[q][j] = hi[q][j] = _mm512_setzero_pd();
  }
  for (size_t c = 0; c < width; c += 16) {
    __m512d rl[RN], rh[RN];
    for (int j = 0; j < RN; ++j) {
      rl[j] = _mm512_loadu_pd(r + j * width + c);
      rh[j] = _mm512_loadu_pd(r + j * width + c + 8);
    }
    for (int q = 0; q < QN; ++q) {
      const __m512d ql = _mm512_loadu_pd(a + q * width + c);
      const __m512d qh = _mm512_loadu_pd(a + q * width + c + 8);
      for (int j = 0; j < RN; ++j) {
        lo[q][j] = _mm512_fmadd_pd(rl[j], ql, lo[q][j]);
        hi[q][j] = _mm512_fmadd_pd(rh[j], qh, hi[q][j]);
      }
    }
  }
  for (int q = 0; q < QN; ++q) {
    for (int j = 0; j < RN; ++j)
      out[q * out_stride + j] = Fold16(lo[q][j], hi[q][j]);
  }
}

template <int QN>
void ScoreRows(const double* a, const double* r, size_t row_count, size_t width,
               double* out, size_t out_stride) {
  size_t j = 0;
  for (; j + 2 <= row_count; j += 2) {
    ScoreTile<QN, 2>(a, r + j * width, width, out + j, out_stride);
  }
  if (j < row_count)
    ScoreTile<QN, 1>(a, r + j * width, width, out + j, out_stride);
}

// QN queries' weights (w[q * w_stride + j]) times the widened rows, added
// in row order to their accumulators, 32 columns (four registers) at a time.
template <int QN>
void WeightedTile(const float* w, size_t w_stride, const double* r,
                  size_t row_count, size_t width, size_t n, double* acc,
                  size_t acc_stride) {
  for (size_t c = 0; c < n; c += 32) {
    __mmask8 mask[4];
    for (int k = 0; k < 4; ++k) {
      const size_t lo = c + 8 * static_cast<size_t>(k);
      const size_t left = lo < n ? n - lo : 0;
      mask[k] = static_cast<__mmask8>(left >= 8 ? 0xffu : (1u << left) - 1);
    }
    __m512d sum[QN][4];
    for (int q = 0; q < QN; ++q) {
      for (int k = 0; k < 4; ++k) {
        sum[q][k] =
            _mm512_maskz_loadu_pd(mask[k], acc + q * acc_stride + c + 8 * k);
      }
    }
    for (size_t j = 0; j < row_count; ++j) {
      __m512d v[4];
      for (int k = 0; k < 4; ++k)
        v[k] = _mm512_loadu_pd(r + j * width + c + 8 * k);
      for (int q = 0; q < QN; ++q) {
        const __m512d weight =
            _mm512_set1_pd(static_cast<double>(w[q * w_stride + j]));
        for (int k = 0; k < 4; ++k) {
          sum[q][k] = _mm512_fmadd_pd(weight, v[k], sum[q][k]);
        }
      }
    }
    for (int q = 0; q < QN; ++q) {
      for (int k = 0; k < 4; ++k) {
        _mm512_mask_storeu_pd(acc + q * acc_stride + c + 8 * k, mask[k],
                              sum[q][k]);
      }
    }
  }
}

}  // namespace

size_t AttentionWidth(size_t n) { return (n + 31) & ~size_t{31}; }

void DotF32RowsManyAvx512(const float* a, size_t a_stride, size_t a_count,
                          const float* rows, size_t row_stride,
                          size_t row_count, size_t n, double* out,
                          size_t out_stride, double* scratch) {
  const size_t width = AttentionWidth(n);
  double* ad = scratch;
  double* rd = scratch + a_count * width;
  Widen(a, a_stride, a_count, n, width, ad);
  Widen(rows, row_stride, row_count, n, width, rd);
  size_t q = 0;
  for (; q + 4 <= a_count; q += 4) {
    ScoreRows<4>(ad + q * width, rd, row_count, width, out + q * out_stride,
                 out_stride);
  }
  for (; q < a_count; ++q) {
    ScoreRows<1>(ad + q * width, rd, row_count, width, out + q * out_stride,
                 out_stride);
  }
}

void AddWeightedRowsManyAvx512(const float* w, size_t w_stride, size_t w_count,
                               const float* rows, size_t row_stride,
                               size_t row_count, size_t n, double* acc,
                               size_t acc_stride, double* scratch) {
  const size_t width = AttentionWidth(n);
  Widen(rows, row_stride, row_count, n, width, scratch);
  size_t q = 0;
  for (; q + 4 <= w_count; q += 4) {
    WeightedTile<4>(w + q * w_stride, w_stride, scratch, row_count, width, n,
                    acc + q * acc_stride, acc_stride);
  }
  for (; q < w_count; ++q) {
    WeightedTile<1>(w + q * w_stride, w_stride, scratch, row_count, width, n,
                    acc + q * acc_stride, acc_stride);
  }
}

}  // namespace flotilla::kernels::internal

#pragma GCC diagnostic pop
#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options
