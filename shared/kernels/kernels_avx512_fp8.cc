// The AVX-512 FP8 row dot product of MatMulFp8 (fp8.h). Bit-identical to
// fp8.cc's scalar RowDot: each weight is e4m3(code) * scale in float (the
// same rounding), widened to double, times x widened; the 16 Dot16 lanes
// are two __m512d registers and fold as the scalar lanes do. FMA is exact
// here: the product of two widened floats fits a double.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

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

// 16 e4m3 codes to floats by bit arithmetic (gathers are slow): a normal
// code's sign, exponent + (127 - 7) and mantissa go straight into the float
// bits; a subnormal one (exponent 0) is m * 2^-9, exact in float. NaN
// codes never get here (CheckFp8Matrix).
inline __m512 DecodeE4m3(__m512i b) {
  const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0x80)), 24);
  const __m512i e = _mm512_and_si512(_mm512_srli_epi32(b, 3), _mm512_set1_epi32(0xf));
  const __m512i m = _mm512_and_si512(b, _mm512_set1_epi32(7));
  const __m512i normal = _mm512_or_si512(
      sign, _mm512_or_si512(
                _mm512_slli_epi32(_mm512_add_epi32(e, _mm512_set1_epi32(120)), 23),
                _mm512_slli_epi32(m, 20)));
  const __m512i subnormal = _mm512_or_si512(
      sign, _mm512_castps_si512(_mm512_mul_ps(_mm512_cvtepi32_ps(m),
                                              _mm512_set1_ps(1.0f / 512))));
  const __mmask16 is_subnormal = _mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512());
  return _mm512_castsi512_ps(
      _mm512_mask_blend_epi32(is_subnormal, normal, subnormal));
}

}  // namespace

double Fp8RowDotAvx512(const uint8_t* codes, const float* scales, size_t cols,
                       const float* x) {
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  for (size_t c = 0; c < cols; c += 16) {
    // A tail reads code 0 (+0.0) and x +0.0 in its missing columns: a +0.0
    // product leaves a lane unchanged (lanes are never -0.0).
    const __mmask16 mask =
        cols - c >= 16 ? __mmask16{0xffff}
                       : static_cast<__mmask16>((1u << (cols - c)) - 1);
    const __m512i index =
        _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(mask, codes + c));
    // Columns c..c+15 share one 128-column block (128 % 16 == 0).
    const __m512 w =
        _mm512_mul_ps(DecodeE4m3(index), _mm512_set1_ps(scales[c / 128]));
    const __m512 xv = _mm512_maskz_loadu_ps(mask, x + c);
    lo = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(w)),
                         _mm512_cvtps_pd(_mm512_castps512_ps256(xv)), lo);
    hi = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(w, 1)),
                         _mm512_cvtps_pd(_mm512_extractf32x8_ps(xv, 1)), hi);
  }
  // i += i+8, +4, +2, +1.
  const __m512d v8 = _mm512_add_pd(lo, hi);
  const __m256d v4 =
      _mm256_add_pd(_mm512_castpd512_pd256(v8), _mm512_extractf64x4_pd(v8, 1));
  const __m128d v2 =
      _mm_add_pd(_mm256_castpd256_pd128(v4), _mm256_extractf128_pd(v4, 1));
  return _mm_cvtsd_f64(_mm_add_sd(v2, _mm_unpackhi_pd(v2, v2)));
}

}  // namespace flotilla::kernels::internal

#pragma GCC diagnostic pop
#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options
