// The AVX2 FP8 row dot product of MatMulFp8 (fp8.h). Bit-identical to
// fp8.cc's scalar RowDot: each weight is lut[code] * scale in float,
// widened to double, times x widened; the 16 Dot16 lanes are four __m256d
// registers folded i += i+8 (a0+a2, a1+a3), +4, +2, +1.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "shared/kernels/fp8.h"
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
  const __m256i sign =
      _mm256_slli_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x80)), 24);
  const __m256i e =
      _mm256_and_si256(_mm256_srli_epi32(b, 3), _mm256_set1_epi32(0xf));
  const __m256i m = _mm256_and_si256(b, _mm256_set1_epi32(7));
  const __m256i normal = _mm256_or_si256(
      sign,
      _mm256_or_si256(
          _mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(120)), 23),
          _mm256_slli_epi32(m, 20)));
  const __m256i subnormal = _mm256_or_si256(
      sign, _mm256_castps_si256(_mm256_mul_ps(_mm256_cvtepi32_ps(m),
                                              _mm256_set1_ps(1.0f / 512))));
  const __m256i is_subnormal = _mm256_cmpeq_epi32(e, _mm256_setzero_si256());
  return _mm256_castsi256_ps(
      _mm256_blendv_epi8(normal, subnormal, is_subnormal));
}

}  // namespace

namespace {

// Lanes 0-3, 4-7, 8-11, 12-15 of the Dot16 order folded as the scalar
// code does: i += i+8, +4, +2, +1.
inline double Fold(const __m256d* lane) {
  const __m256d v4 = _mm256_add_pd(_mm256_add_pd(lane[0], lane[2]),
                                   _mm256_add_pd(lane[1], lane[3]));
  const __m128d v2 =
      _mm_add_pd(_mm256_castpd256_pd128(v4), _mm256_extractf128_pd(v4, 1));
  return _mm_cvtsd_f64(_mm_add_sd(v2, _mm_unpackhi_pd(v2, v2)));
}

// Columns c..c+15 of a row into two __m256 (they share one 128-column
// block); a tail's missing columns are code 0, +0.0.
inline void Weights(const uint8_t* codes, const float* scales, size_t cols,
                    size_t c, __m256* w) {
  uint8_t tail[16] = {};
  const uint8_t* cp = codes + c;
  if (cols - c < 16) {
    for (size_t i = 0; c + i < cols; ++i) tail[i] = cp[i];
    cp = tail;
  }
  const __m256 scale = _mm256_set1_ps(scales[c / 128]);
  for (int h = 0; h < 2; ++h) {
    const __m256i index = _mm256_cvtepu8_epi32(
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(cp + 8 * h)));
    w[h] = _mm256_mul_ps(DecodeE4m3(index), scale);
  }
}

// One Dot16 step against xd[c..c+15] (zero-padded past the columns): FMA
// is exact, a product of two widened floats fits a double.
inline void Accumulate(const __m256* w, const double* xd, size_t c,
                       __m256d* lane) {
  for (int h = 0; h < 2; ++h) {
    lane[2 * h] = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(w[h])),
                                  _mm256_loadu_pd(xd + c + 8 * h), lane[2 * h]);
    lane[2 * h + 1] =
        _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(w[h], 1)),
                        _mm256_loadu_pd(xd + c + 8 * h + 4), lane[2 * h + 1]);
  }
}

}  // namespace

void Fp8RowsAvx2(const Fp8BlockMatrix& m, const double* xd, size_t n_tokens,
                 size_t row_begin, size_t row_end, float* scratch, float* y,
                 size_t y_row0) {
  const size_t cols = m.cols, scale_cols = m.scale_cols();
  const size_t stride = Fp8XStride(cols);
  for (size_t r = row_begin; r < row_end; ++r) {
    const uint8_t* codes = m.codes + r * cols;
    const float* scales = m.scale_inv + (r / kFp8Block) * scale_cols;
    __m256 w[2];
    if (n_tokens == 1) {
      __m256d lane[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(),
                         _mm256_setzero_pd(), _mm256_setzero_pd()};
      for (size_t c = 0; c < cols; c += 16) {
        Weights(codes, scales, cols, c, w);
        Accumulate(w, xd, c, lane);
      }
      y[r - y_row0] = static_cast<float>(Fold(lane));
      continue;
    }
    // Several tokens: the row decoded once (zero-padded to the stride),
    // then read per token.
    for (size_t c = 0; c < cols; c += 16) {
      Weights(codes, scales, cols, c, w);
      _mm256_storeu_ps(scratch + c, w[0]);
      _mm256_storeu_ps(scratch + c + 8, w[1]);
    }
    for (size_t t = 0; t < n_tokens; ++t) {
      __m256d lane[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(),
                         _mm256_setzero_pd(), _mm256_setzero_pd()};
      for (size_t c = 0; c < cols; c += 16) {
        w[0] = _mm256_loadu_ps(scratch + c);
        w[1] = _mm256_loadu_ps(scratch + c + 8);
        Accumulate(w, xd + t * stride, c, lane);
      }
      y[t * m.rows + r - y_row0] = static_cast<float>(Fold(lane));
    }
  }
}

void Fp8DecodeRowAvx2(const uint8_t* codes, const float* scales, size_t cols,
                      float* out) {
  __m256 w[2];
  float tail[16];
  for (size_t c = 0; c < cols; c += 16) {
    Weights(codes, scales, cols, c, w);
    float* dst = cols - c >= 16 ? out + c : tail;
    _mm256_storeu_ps(dst, w[0]);
    _mm256_storeu_ps(dst + 8, w[1]);
    if (dst == tail) {
      for (size_t i = 0; c + i < cols; ++i) out[c + i] = tail[i];
    }
  }
}

}  // namespace flotilla::kernels::internal

#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options
