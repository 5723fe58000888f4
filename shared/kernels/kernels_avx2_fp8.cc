// The AVX2 FP8 row dot product of MatMulFp8 (fp8.h). Bit-identical to
// fp8.cc's scalar RowDot: each weight is lut[code] * scale in float,
// widened to double, times x widened; the 16 Dot16 lanes are four __m256d
// registers folded i += i+8 (a0+a2, a1+a3), +4, +2, +1.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "shared/kernels/kernels_internal.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), \
                             apply_to = function)
#endif

namespace flotilla::kernels::internal {
namespace {

// 8 e4m3 codes to floats by bit arithmetic, as in kernels_avx512_fp8.cc.
inline __m256 DecodeE4m3(__m256i b) {
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x80)), 24);
  const __m256i e = _mm256_and_si256(_mm256_srli_epi32(b, 3), _mm256_set1_epi32(0xf));
  const __m256i m = _mm256_and_si256(b, _mm256_set1_epi32(7));
  const __m256i normal = _mm256_or_si256(
      sign, _mm256_or_si256(
                _mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(120)), 23),
                _mm256_slli_epi32(m, 20)));
  const __m256i subnormal = _mm256_or_si256(
      sign, _mm256_castps_si256(_mm256_mul_ps(_mm256_cvtepi32_ps(m),
                                              _mm256_set1_ps(1.0f / 512))));
  const __m256i is_subnormal = _mm256_cmpeq_epi32(e, _mm256_setzero_si256());
  return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, subnormal, is_subnormal));
}

}  // namespace

double Fp8RowDotAvx2(const uint8_t* codes, const float* scales, size_t cols,
                     const float* x) {
  __m256d lane[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(),
                     _mm256_setzero_pd(), _mm256_setzero_pd()};
  uint8_t code_tail[16];
  float x_tail[16];
  for (size_t c = 0; c < cols; c += 16) {
    const uint8_t* cp = codes + c;
    const float* xp = x + c;
    if (cols - c < 16) {
      // Zero-padded tail: code 0 is +0.0, and a +0.0 product leaves a lane
      // unchanged (lanes are never -0.0).
      for (size_t i = 0; i < 16; ++i) {
        code_tail[i] = c + i < cols ? codes[c + i] : 0;
        x_tail[i] = c + i < cols ? x[c + i] : 0.0f;
      }
      cp = code_tail;
      xp = x_tail;
    }
    const __m256 scale = _mm256_set1_ps(scales[c / 128]);
    for (int h = 0; h < 2; ++h) {
      const __m256i index = _mm256_cvtepu8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(cp + 8 * h)));
      const __m256 w = _mm256_mul_ps(DecodeE4m3(index), scale);
      const __m256 xv = _mm256_loadu_ps(xp + 8 * h);
      lane[2 * h] = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(w)),
                                    _mm256_cvtps_pd(_mm256_castps256_ps128(xv)),
                                    lane[2 * h]);
      lane[2 * h + 1] =
          _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(w, 1)),
                          _mm256_cvtps_pd(_mm256_extractf128_ps(xv, 1)),
                          lane[2 * h + 1]);
    }
  }
  const __m256d v4 = _mm256_add_pd(_mm256_add_pd(lane[0], lane[2]),
                                   _mm256_add_pd(lane[1], lane[3]));
  const __m128d v2 =
      _mm_add_pd(_mm256_castpd256_pd128(v4), _mm256_extractf128_pd(v4, 1));
  return _mm_cvtsd_f64(_mm_add_sd(v2, _mm_unpackhi_pd(v2, v2)));
}

}  // namespace flotilla::kernels::internal

#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options
