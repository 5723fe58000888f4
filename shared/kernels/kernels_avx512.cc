// AVX-512 kernels (F, BW, DQ, VL). Bit-identical to kernels_scalar.cc: the
// 16 Dot16 lanes are two __m512d registers (lanes 0-7 and 8-15) and the
// folds are the same i += i+8, +4, +2, +1. FMA is used freely: a product of
// two widened floats is exact in double, so fma(a, b, c) == c + a * b.
// Attention's float kernels are in kernels_avx512_attention.cc.
//
// Every function here carries the target attribute through the pragma; no
// standard-library template is instantiated in this file (see
// kernels_internal.h for why).
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

// Folds 8 double lanes: i += i+4, then +2, then +1.
inline double Fold8(__m512d v) {
  const __m256d v4 =
      _mm256_add_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd(v, 1));
  const __m128d v2 =
      _mm_add_pd(_mm256_castpd256_pd128(v4), _mm256_extractf128_pd(v4, 1));
  return _mm_cvtsd_f64(_mm_add_sd(v2, _mm_unpackhi_pd(v2, v2)));
}

// Loads 16 weights (columns c..c+15 of a row) widened to double: lo holds
// columns 0-7, hi 8-15. `mask` selects the valid columns of a tail; masked
// out lanes read as +0.0 and never touch memory.
inline void Load16(const float* p, __mmask16 mask, __m512d* lo, __m512d* hi) {
  const __m512 v = _mm512_maskz_loadu_ps(mask, p);
  *lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
  *hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1));
}

inline void Load16(const uint16_t* p, __mmask16 mask, __m512d* lo,
                   __m512d* hi) {
  // bf16 -> f32 is a 16-bit left shift of the bits: exact.
  const __m256i bits = _mm256_maskz_loadu_epi16(mask, p);
  const __m512 v =
      _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
  *lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
  *hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1));
}

// One 16-column step of DotRows: columns c..c+15 of R rows (`stride`
// apart) against x.
template <int R, typename W>
inline void Step16(const W* w, size_t stride, const float* x, size_t c,
                   __mmask16 mask, __m512d* acc_lo, __m512d* acc_hi) {
  __m512d x_lo, x_hi;
  Load16(x + c, mask, &x_lo, &x_hi);
  for (int r = 0; r < R; ++r) {
    __m512d w_lo, w_hi;
    Load16(w + r * stride + c, mask, &w_lo, &w_hi);
    acc_lo[r] = _mm512_fmadd_pd(w_lo, x_lo, acc_lo[r]);
    acc_hi[r] = _mm512_fmadd_pd(w_hi, x_hi, acc_hi[r]);
  }
}

// R rows of `cols` values, `stride` apart, against one x, Dot16 order.
// Several rows share each x load and give the FMA units independent
// dependency chains.
template <int R, typename W>
inline void DotRows(const W* w, size_t stride, size_t cols, const float* x,
                    double* out) {
  __m512d acc_lo[R], acc_hi[R];
  for (int r = 0; r < R; ++r) {
    acc_lo[r] = _mm512_setzero_pd();
    acc_hi[r] = _mm512_setzero_pd();
  }
  const size_t full = cols & ~size_t{15};
  for (size_t c = 0; c < full; c += 16) {
    Step16<R>(w, stride, x, c, static_cast<__mmask16>(0xffff), acc_lo, acc_hi);
  }
  if (full < cols) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (cols - full)) - 1);
    Step16<R>(w, stride, x, full, tail, acc_lo, acc_hi);
  }
  for (int r = 0; r < R; ++r) {
    out[r] = Fold8(_mm512_add_pd(acc_lo[r], acc_hi[r]));
  }
}

template <typename W>
void DenseRowsT(const W* data, size_t rows, size_t cols, const float* x,
                size_t n_tokens, size_t row_begin, size_t row_end, float* y) {
  constexpr int kBlock = 4;
  size_t r = row_begin;
  // Tokens loop inside the row block: the block's weights come from memory
  // once per batch and from L1/L2 for the other tokens.
  for (; r + kBlock <= row_end; r += kBlock) {
    for (size_t t = 0; t < n_tokens; ++t) {
      double out[kBlock];
      DotRows<kBlock>(data + r * cols, cols, cols, x + t * cols, out);
      for (int k = 0; k < kBlock; ++k) {
        y[t * rows + r + k] = static_cast<float>(out[k]);
      }
    }
  }
  for (; r < row_end; ++r) {
    for (size_t t = 0; t < n_tokens; ++t) {
      double out;
      DotRows<1>(data + r * cols, cols, cols, x + t * cols, &out);
      y[t * rows + r] = static_cast<float>(out);
    }
  }
}

void DenseRows(const DenseMatrix& w, const float* x, const double* xd,
               size_t n_tokens, size_t row_begin, size_t row_end, float* y) {
  if (w.type == DenseType::kBF16 && xd != nullptr) {
    Bf16RowsAvx512(static_cast<const uint16_t*>(w.data), w.rows, w.cols, xd,
                   n_tokens, row_begin, row_end, y);
  } else if (w.type == DenseType::kBF16) {
    DenseRowsT(static_cast<const uint16_t*>(w.data), w.rows, w.cols, x,
               n_tokens, row_begin, row_end, y);
  } else {
    DenseRowsT(static_cast<const float*>(w.data), w.rows, w.cols, x, n_tokens,
               row_begin, row_end, y);
  }
}

double Dot(const float* a, const float* b, size_t n) {
  double out;
  DotRows<1>(a, n, n, b, &out);
  return out;
}

}  // namespace

const KernelTable& Avx512Table() {
  static const KernelTable table = {&Dot,
                                    &DenseRows,
                                    &Mxfp4RowsAvx512,
                                    &Bf16PermuteX,
                                    &Mxfp4PermuteX,
                                    &DotStridedRowsAvx512,
                                    &AddWeightedRowsAvx512};
  return table;
}

}  // namespace flotilla::kernels::internal

#pragma GCC diagnostic pop
#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options
