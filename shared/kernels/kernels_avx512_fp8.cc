// The AVX-512 FP8 row dot product of MatMulFp8 (fp8.h). Bit-identical to
// fp8.cc's scalar RowDot: each weight is lut[code] * scale in float (the
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

double Fp8RowDotAvx512(const uint8_t* codes, const float* scales, size_t cols,
                       const float* x, const float* lut) {
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
    const __m512 w = _mm512_mul_ps(_mm512_i32gather_ps(index, lut, 4),
                                   _mm512_set1_ps(scales[c / 128]));
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
