// The AVX-512 rows of MatMulFp8 (fp8.h). Bit-identical to fp8.cc's scalar
// RowDot: each weight is e4m3(code) * scale in float (the same rounding),
// widened to double, times x (widened once per call by the caller); the 16
// Dot16 lanes are two __m512d registers and fold as the scalar lanes do.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "shared/kernels/fp8.h"
#include "shared/kernels/kernels_internal.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")
#if defined(__clang__)
#pragma clang attribute push(                                               \
    __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma"))), \
    apply_to = function)
#endif
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace flotilla::kernels::internal {
namespace {

// 16 e4m3 codes (NaN codes never get here: CheckFp8Matrix) times their
// block's scale, as float(e4m3 * scale) in one rounding. A normal code's
// exponent (+ 127 - 7) and mantissa go straight into float bits 20-30 and
// its sign into bit 31, exactly its value; a subnormal one (exponent 0, a
// few in ten thousand in the releases) is m * 2^-9, exact in float, and
// takes a blend only when its vector holds one. Gathers are slow, and a
// float denormal operand costs a microcode assist, so neither is used.
inline __m512 DecodeScaled(__m512i b, __m512 scale) {
  const __m512i magnitude = _mm512_add_epi32(
      _mm512_and_si512(_mm512_slli_epi32(b, 20), _mm512_set1_epi32(0x07f00000)),
      _mm512_set1_epi32(120 << 23));
  const __m512i sign =
      _mm512_and_si512(_mm512_slli_epi32(b, 24), _mm512_set1_epi32(INT32_MIN));
  __m512i bits = _mm512_or_si512(magnitude, sign);
  const __mmask16 subnormal =
      _mm512_testn_epi32_mask(b, _mm512_set1_epi32(0x78));
  if (subnormal != 0) {
    const __m512 m =
        _mm512_cvtepi32_ps(_mm512_and_si512(b, _mm512_set1_epi32(7)));
    bits = _mm512_mask_or_epi32(
        bits, subnormal, sign,
        _mm512_castps_si512(_mm512_mul_ps(m, _mm512_set1_ps(1.0f / 512))));
  }
  return _mm512_mul_ps(_mm512_castsi512_ps(bits), scale);
}

}  // namespace

namespace {

// The 16 lanes folded as the scalar Dot16 does: i += i+8, +4, +2, +1.
inline double Fold(__m512d lo, __m512d hi) {
  const __m512d v8 = _mm512_add_pd(lo, hi);
  const __m256d v4 =
      _mm256_add_pd(_mm512_castpd512_pd256(v8), _mm512_extractf64x4_pd(v8, 1));
  const __m128d v2 =
      _mm_add_pd(_mm256_castpd256_pd128(v4), _mm256_extractf128_pd(v4, 1));
  return _mm_cvtsd_f64(_mm_add_sd(v2, _mm_unpackhi_pd(v2, v2)));
}

inline __mmask16 TailMask(size_t left) {
  return left >= 16 ? __mmask16{0xffff}
                    : static_cast<__mmask16>((1u << left) - 1);
}

// Columns c..c+15 decoded and scaled (they share one 128-column block, as
// 128 % 16 == 0); a tail's missing columns are code 0, +0.0.
inline __m512 Weights(const uint8_t* codes, const float* scales, size_t c,
                      __mmask16 mask) {
  const __m512i index =
      _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(mask, codes + c));
  return DecodeScaled(index, _mm512_set1_ps(scales[c / 128]));
}

// One Dot16 step: lanes 0-7 take w's low half times xd[c..c+7], lanes 8-15
// the high half times xd[c+8..c+15]. FMA is exact: a product of two
// widened floats fits a double; a +0.0 tail product leaves a lane as it is
// (lanes are never -0.0).
inline void Accumulate(__m512 w, const double* xd, size_t c, __mmask16 mask,
                       __m512d* lo, __m512d* hi) {
  const __m512d x_lo =
      _mm512_maskz_loadu_pd(static_cast<__mmask8>(mask), xd + c);
  const __m512d x_hi =
      _mm512_maskz_loadu_pd(static_cast<__mmask8>(mask >> 8), xd + c + 8);
  *lo = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(w)), x_lo, *lo);
  *hi =
      _mm512_fmadd_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(w, 1)), x_hi, *hi);
}

}  // namespace

void Fp8RowsAvx512(const Fp8BlockMatrix& m, const double* xd, size_t n_tokens,
                   size_t row_begin, size_t row_end, float* scratch, float* y,
                   size_t y_row0) {
  const size_t cols = m.cols, scale_cols = m.scale_cols();
  for (size_t r = row_begin; r < row_end; ++r) {
    const uint8_t* codes = m.codes + r * cols;
    const float* scales = m.scale_inv + (r / kFp8Block) * scale_cols;
    if (n_tokens == 1) {
      __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
      for (size_t c = 0; c < cols; c += 16) {
        const __mmask16 mask = TailMask(cols - c);
        Accumulate(Weights(codes, scales, c, mask), xd, c, mask, &lo, &hi);
      }
      y[r - y_row0] = static_cast<float>(Fold(lo, hi));
      continue;
    }
    // Several tokens: the row decoded once, then read per token.
    for (size_t c = 0; c < cols; c += 16) {
      const __mmask16 mask = TailMask(cols - c);
      _mm512_mask_storeu_ps(scratch + c, mask, Weights(codes, scales, c, mask));
    }
    for (size_t t = 0; t < n_tokens; ++t) {
      __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
      const double* xt = xd + t * Fp8XStride(cols);
      for (size_t c = 0; c < cols; c += 16) {
        const __mmask16 mask = TailMask(cols - c);
        Accumulate(_mm512_maskz_loadu_ps(mask, scratch + c), xt, c, mask, &lo,
                   &hi);
      }
      y[t * m.rows + r - y_row0] = static_cast<float>(Fold(lo, hi));
    }
  }
}

void Fp8DecodeRowAvx512(const uint8_t* codes, const float* scales, size_t cols,
                        float* out) {
  for (size_t c = 0; c < cols; c += 16) {
    const __mmask16 mask = TailMask(cols - c);
    _mm512_mask_storeu_ps(out + c, mask, Weights(codes, scales, c, mask));
  }
}

}  // namespace flotilla::kernels::internal

#pragma GCC diagnostic pop
#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options
