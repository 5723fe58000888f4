// AVX2 + FMA kernels. Bit-identical to kernels_scalar.cc: the 16 Dot16
// lanes are four __m256d registers (lanes 0-3, 4-7, 8-11, 12-15), folded
// i += i+8 (a0+a2, a1+a3), +4, +2, +1. FMA is safe because a product of two
// widened floats is exact in double. Attention's float orders: a score's 32
// Dot32 lanes are four __m256 registers, one FMA per product as the scalar
// std::fma, the tail's lanes blended back where they have no column.
//
// No standard-library templates are instantiated here (kernels_internal.h).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "shared/kernels/kernels_internal.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#if defined(__clang__)
// Clang ignores the GCC pragma; this gives the functions defined below (and
// only those, not inline library code from the headers above) the ISA.
#pragma clang attribute push(__attribute__((target("avx2,fma"))), \
                             apply_to = function)
#endif

namespace flotilla::kernels::internal {
namespace {

// Folds 4 double lanes: i += i+2, then +1.
inline double Fold4(__m256d v) {
  const __m128d v2 =
      _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(v2, _mm_unpackhi_pd(v2, v2)));
}

// Loads 16 consecutive weights widened to double, 4 per register.
inline void Load16(const float* p, __m256d* out) {
  for (int i = 0; i < 4; ++i) out[i] = _mm256_cvtps_pd(_mm_loadu_ps(p + 4 * i));
}

inline void Load16(const uint16_t* p, __m256d* out) {
  for (int h = 0; h < 2; ++h) {
    // bf16 -> f32 is a 16-bit left shift of the bits: exact.
    const __m128i bits =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8 * h));
    const __m256 v =
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
    out[2 * h] = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    out[2 * h + 1] = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
  }
}

template <int R, typename W>
inline void Step16(const W* const* w, const float* x, __m256d (*acc)[4]) {
  __m256d xv[4];
  Load16(x, xv);
  for (int r = 0; r < R; ++r) {
    __m256d wv[4];
    Load16(w[r], wv);
    for (int i = 0; i < 4; ++i)
      acc[r][i] = _mm256_fmadd_pd(wv[i], xv[i], acc[r][i]);
  }
}

// R rows of `cols` values, `stride` apart, against one x, Dot16 order. Two
// rows keep 8 accumulators plus the 4 x registers within the 16 ymm
// registers.
template <int R, typename W>
inline void DotRows(const W* w, size_t stride, size_t cols, const float* x,
                    double* out) {
  __m256d acc[R][4];
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < 4; ++i) acc[r][i] = _mm256_setzero_pd();
  }
  const size_t full = cols & ~size_t{15};
  const W* rows[R];
  for (size_t c = 0; c < full; c += 16) {
    for (int r = 0; r < R; ++r) rows[r] = w + r * stride + c;
    Step16<R>(rows, x + c, acc);
  }
  if (full < cols) {
    // AVX2 has no 16-bit masked load: copy the tail into zero-padded
    // buffers. A zero product added to a lane that is never -0.0 (lanes
    // start at +0.0) leaves it unchanged, exactly as in the scalar order.
    W w_tail[R][16] = {};
    float x_tail[16] = {};
    for (size_t c = full; c < cols; ++c) {
      x_tail[c - full] = x[c];
      for (int r = 0; r < R; ++r) w_tail[r][c - full] = w[r * stride + c];
    }
    for (int r = 0; r < R; ++r) rows[r] = w_tail[r];
    Step16<R>(rows, x_tail, acc);
  }
  for (int r = 0; r < R; ++r) {
    const __m256d a = _mm256_add_pd(_mm256_add_pd(acc[r][0], acc[r][2]),
                                    _mm256_add_pd(acc[r][1], acc[r][3]));
    out[r] = Fold4(a);
  }
}

template <typename W>
void DenseRowsT(const W* data, size_t rows, size_t cols, const float* x,
                size_t n_tokens, size_t row_begin, size_t row_end, float* y) {
  constexpr int kBlock = 2;
  size_t r = row_begin;
  // Tokens loop inside the row block so its weights leave memory once.
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

void DenseRows(const DenseMatrix& w, const float* x, const double* /*xd*/,
               size_t n_tokens, size_t row_begin, size_t row_end, float* y) {
  if (w.type == DenseType::kBF16) {
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

// The Dot32 tree over lanes 8k..8k+7 in a[k]: i += i+16 (0+2, 1+3), +8,
// +4, +2, +1.
inline float Fold32(const __m256* a) {
  const __m256 v8 =
      _mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3]));
  const __m128 v4 =
      _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
  const __m128 v2 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
  return _mm_cvtss_f32(_mm_add_ss(v2, _mm_movehdup_ps(v2)));
}

// R rows (`stride` apart) against a in the Dot32 float order: 32 columns
// per step; the tail from zero-padded copies, its FMAs blended back where
// a lane has no column (a masked FMA).
template <int R>
inline void ScoreRowsF(const float* rows, size_t stride, size_t n,
                       const float* a, float* out) {
  __m256 acc[R][4];
  for (int r = 0; r < R; ++r) {
    for (int k = 0; k < 4; ++k) acc[r][k] = _mm256_setzero_ps();
  }
  const size_t full = n & ~size_t{31};
  for (size_t c = 0; c < full; c += 32) {
    for (int k = 0; k < 4; ++k) {
      const __m256 av = _mm256_loadu_ps(a + c + 8 * k);
      for (int r = 0; r < R; ++r) {
        acc[r][k] = _mm256_fmadd_ps(
            av, _mm256_loadu_ps(rows + r * stride + c + 8 * k), acc[r][k]);
      }
    }
  }
  if (full < n) {
    float a_tail[32] = {};
    float r_tail[R][32] = {};
    for (size_t c = full; c < n; ++c) {
      a_tail[c - full] = a[c];
      for (int r = 0; r < R; ++r) r_tail[r][c - full] = rows[r * stride + c];
    }
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int k = 0; k < 4; ++k) {
      const __m256 live = _mm256_castsi256_ps(_mm256_cmpgt_epi32(
          _mm256_set1_epi32(static_cast<int>(n - full) - 8 * k), iota));
      const __m256 av = _mm256_loadu_ps(a_tail + 8 * k);
      for (int r = 0; r < R; ++r) {
        const __m256 sum =
            _mm256_fmadd_ps(av, _mm256_loadu_ps(r_tail[r] + 8 * k), acc[r][k]);
        acc[r][k] = _mm256_blendv_ps(acc[r][k], sum, live);
      }
    }
  }
  for (int r = 0; r < R; ++r) out[r] = Fold32(acc[r]);
}

void DotStridedRows(const float* a, const float* rows, size_t stride,
                    size_t count, size_t n, float* out) {
  constexpr int kBlock = 2;
  size_t j = 0;
  for (; j + kBlock <= count; j += kBlock) {
    ScoreRowsF<kBlock>(rows + j * stride, stride, n, a, out + j);
  }
  for (; j < count; ++j)
    ScoreRowsF<1>(rows + j * stride, stride, n, a, out + j);
}

// One float lane per column: acc[i] = fma(w[j], row_j[i], acc[i]) for j in
// order, 64 columns (eight registers) at a time, so acc is read and written
// once per block of columns, not once per row; the last n % 8 columns one
// scalar FMA each.
void AddWeightedRows(const float* w, const float* rows, size_t stride,
                     size_t count, size_t n, float* acc) {
  size_t c = 0;
  for (; c + 8 <= n; c += 64) {
    const int regs = static_cast<int>((n - c >= 64 ? 64 : n - c) / 8);
    __m256 sum[8];
    for (int k = 0; k < regs; ++k) sum[k] = _mm256_loadu_ps(acc + c + 8 * k);
    for (size_t j = 0; j < count; ++j) {
      const __m256 weight = _mm256_set1_ps(w[j]);
      const float* row = rows + j * stride + c;
      for (int k = 0; k < regs; ++k) {
        sum[k] = _mm256_fmadd_ps(weight, _mm256_loadu_ps(row + 8 * k), sum[k]);
      }
    }
    for (int k = 0; k < regs; ++k) _mm256_storeu_ps(acc + c + 8 * k, sum[k]);
    if (regs < 8) {
      c += 8 * static_cast<size_t>(regs);
      break;
    }
  }
  for (; c < n; ++c) {
    float sum = acc[c];
    for (size_t j = 0; j < count; ++j) {
      sum = __builtin_fmaf(w[j], rows[j * stride + c], sum);
    }
    acc[c] = sum;
  }
}

// Decodes 8 nibbles (32-bit lanes, value in bits 0-3, higher bits ignored
// except as noted) to E2M1 floats: magnitude from an 8-entry permute (which
// reads only bits 0-2), sign from bit 3. Nibble 8 gives -0.0 like the LUT.
inline __m256 DecodeE2m1(__m256i nibbles, __m256 magnitudes) {
  const __m256 mag = _mm256_permutevar8x32_ps(magnitudes, nibbles);
  const __m256i sign = _mm256_and_si256(_mm256_slli_epi32(nibbles, 28),
                                        _mm256_set1_epi32(INT32_MIN));
  return _mm256_or_ps(mag, _mm256_castsi256_ps(sign));
}

constexpr size_t kTokenTile = 4;

void Mxfp4Rows(const Mxfp4Matrix& w, const float* /*x*/, const double* xd,
               size_t n_tokens, size_t row_begin, size_t row_end, float* y) {
  const size_t cols = w.cols;
  const size_t groups = cols / 32;
  const __m256 magnitudes = _mm256_loadu_ps(kE2m1Lut);
  for (size_t r = row_begin; r < row_end; ++r) {
    const uint8_t* packed = w.packed + r * (cols / 2);
    const uint8_t* scales = w.scales + r * groups;
    for (size_t t0 = 0; t0 < n_tokens; t0 += kTokenTile) {
      const size_t nt = n_tokens - t0 < kTokenTile ? n_tokens - t0 : kTokenTile;
      double total[kTokenTile] = {0.0, 0.0, 0.0, 0.0};
      for (size_t g = 0; g < groups; ++g) {
        const uint64_t s = scales[g];
        if (s == 255) continue;  // E8M0 NaN: the group contributes nothing.
        // wv[q][h]: q = a (cols 2i), b (16+2i), c (2i+1), d (17+2i); h =
        // lanes 0-3 or 4-7. Matches the xd slot layout (Mxfp4PermuteX).
        __m256d wv[4][2];
        for (int half = 0; half < 2; ++half) {
          const __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(
              reinterpret_cast<const __m128i*>(packed + g * 16 + 8 * half)));
          const __m256 lo = DecodeE2m1(bytes, magnitudes);
          const __m256 hi = DecodeE2m1(_mm256_srli_epi32(bytes, 4), magnitudes);
          wv[half][0] = _mm256_cvtps_pd(_mm256_castps256_ps128(lo));
          wv[half][1] = _mm256_cvtps_pd(_mm256_extractf128_ps(lo, 1));
          wv[2 + half][0] = _mm256_cvtps_pd(_mm256_castps256_ps128(hi));
          wv[2 + half][1] = _mm256_cvtps_pd(_mm256_extractf128_ps(hi, 1));
        }
        const uint64_t scale_bits = (s + 1023 - 127) << 52;
        double scale;
        __builtin_memcpy(&scale, &scale_bits, sizeof scale);
        for (size_t k = 0; k < nt; ++k) {
          const double* xg = xd + (t0 + k) * cols + g * 32;
          __m256d lane[2];
          for (int h = 0; h < 2; ++h) {
            // lane = (a + b) + (c + d), per lane, as in the scalar order.
            __m256d e0 = _mm256_mul_pd(wv[0][h], _mm256_loadu_pd(xg + 4 * h));
            e0 = _mm256_fmadd_pd(wv[1][h], _mm256_loadu_pd(xg + 8 + 4 * h), e0);
            __m256d e1 =
                _mm256_mul_pd(wv[2][h], _mm256_loadu_pd(xg + 16 + 4 * h));
            e1 =
                _mm256_fmadd_pd(wv[3][h], _mm256_loadu_pd(xg + 24 + 4 * h), e1);
            lane[h] = _mm256_add_pd(e0, e1);
          }
          // Lanes i += i+4 is lane[0] + lane[1]; then +2, +1.
          total[k] += Fold4(_mm256_add_pd(lane[0], lane[1])) * scale;
        }
      }
      for (size_t k = 0; k < nt; ++k) {
        y[(t0 + k) * w.rows + r] = static_cast<float>(total[k]);
      }
    }
  }
}

}  // namespace

const KernelTable& Avx2Table() {
  static const KernelTable table = {
      &Dot,           &DenseRows,      &Mxfp4Rows,      nullptr,
      &Mxfp4PermuteX, &DotStridedRows, &AddWeightedRows};
  return table;
}

}  // namespace flotilla::kernels::internal

#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options
