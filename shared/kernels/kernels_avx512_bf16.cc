// AVX-512 bf16 matmul, bit-identical to the scalar Dot16 order.
//
// Widening bf16 is the bulk of the work in a bf16 matvec, so this kernel
// widens 32 weights with two unpacks against zero (bf16 bits land in the
// high half of each 32-bit lane: exactly the float) instead of a zero-extend
// plus shift per 16. The unpacks permute columns within 128-bit lanes; x is
// widened to double once per call in the same permutation (Bf16PermuteX), so
// no weight is ever shuffled back. Per 32 columns the registers hold:
//   A: cols 0-3, 8-11    B: cols 16-19, 24-27   (accumulator P)
//   C: cols 4-7, 12-15   D: cols 20-23, 28-31   (accumulator Q)
// P's lanes are Dot16 lanes 0-3 and 8-11, Q's 4-7 and 12-15, and each lane
// still receives its columns in increasing order (A before B, C before D),
// so the lanes and the fold i += i+8, +4, +2, +1 match the scalar code.
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

// Columns c..c+31 of R rows (stride cols) against T tokens' permuted x.
// Masked-out columns load as +0.0 and their x slots are zero padding, so
// they add +0.0 to lanes that are never -0.0: no change, as in the scalar.
template <int R, int T, bool kPrefetchRow = true>
inline void Step32(const uint16_t* w, size_t cols, const double* const* xd,
                   size_t c, __mmask32 mask, __m512d (*p)[T], __m512d (*q)[T]) {
  const __m512i zero = _mm512_setzero_si512();
  for (int r = 0; r < R; ++r) {
    // Software prefetch 2 KB ahead in each row stream: with 7168-wide rows
    // the hardware prefetcher alone left a 12288x7168 matvec at about half
    // of the memory bandwidth. (Prefetches never fault past the end.)
    if (kPrefetchRow) {
      // Past the row's end, the same row of the next block of R rows (what
      // runs next): with 2048-wide rows the plain offset landed in rows this
      // block had already read for half of every row.
      const size_t ahead = c + 1024;
      const uint16_t* next = ahead < cols ? w + r * cols + ahead
                                          : w + (r + R) * cols + (ahead - cols);
      _mm_prefetch(reinterpret_cast<const char*>(next), _MM_HINT_T0);
    }
    const __m512i bits = _mm512_maskz_loadu_epi16(mask, w + r * cols + c);
    const __m512 lo = _mm512_castsi512_ps(_mm512_unpacklo_epi16(zero, bits));
    const __m512 hi = _mm512_castsi512_ps(_mm512_unpackhi_epi16(zero, bits));
    const __m512d a = _mm512_cvtps_pd(_mm512_castps512_ps256(lo));
    const __m512d b = _mm512_cvtps_pd(_mm512_extractf32x8_ps(lo, 1));
    const __m512d cc = _mm512_cvtps_pd(_mm512_castps512_ps256(hi));
    const __m512d d = _mm512_cvtps_pd(_mm512_extractf32x8_ps(hi, 1));
    for (int t = 0; t < T; ++t) {
      // Products of widened floats are exact: FMA rounds only the sum.
      const double* x = xd[t] + c;
      p[r][t] = _mm512_fmadd_pd(a, _mm512_loadu_pd(x), p[r][t]);
      p[r][t] = _mm512_fmadd_pd(b, _mm512_loadu_pd(x + 8), p[r][t]);
      q[r][t] = _mm512_fmadd_pd(cc, _mm512_loadu_pd(x + 16), q[r][t]);
      q[r][t] = _mm512_fmadd_pd(d, _mm512_loadu_pd(x + 24), q[r][t]);
    }
  }
}

// The Dot16 fold from P (lanes 0-3, 8-11) and Q (lanes 4-7, 12-15).
inline double FoldPq(__m512d p, __m512d q) {
  const __m256d p8 =
      _mm256_add_pd(_mm512_castpd512_pd256(p), _mm512_extractf64x4_pd(p, 1));
  const __m256d q8 =
      _mm256_add_pd(_mm512_castpd512_pd256(q), _mm512_extractf64x4_pd(q, 1));
  const __m256d v4 = _mm256_add_pd(p8, q8);  // lanes 0-3 after i += i+4
  const __m128d v2 =
      _mm_add_pd(_mm256_castpd256_pd128(v4), _mm256_extractf128_pd(v4, 1));
  return _mm_cvtsd_f64(_mm_add_sd(v2, _mm_unpackhi_pd(v2, v2)));
}

// R rows times T tokens; out[t * R + r].
template <int R, int T>
void Block(const uint16_t* w, size_t cols, const double* const* xd,
           double* out) {
  __m512d p[R][T], q[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      p[r][t] = _mm512_setzero_pd();
      q[r][t] = _mm512_setzero_pd();
    }
  }
  const size_t full = cols & ~size_t{31};
  for (size_t c = 0; c < full; c += 32) {
    Step32<R, T>(w, cols, xd, c, ~__mmask32{0}, p, q);
  }
  if (full < cols) {
    const __mmask32 tail = (__mmask32{1} << (cols - full)) - 1;
    Step32<R, T>(w, cols, xd, full, tail, p, q);
  }
  for (int t = 0; t < T; ++t) {
    for (int r = 0; r < R; ++r) out[t * R + r] = FoldPq(p[r][t], q[r][t]);
  }
}

template <int R, int T>
void BlockToY(const uint16_t* data, size_t rows, size_t cols, const double* xd,
              size_t x_stride, size_t r, size_t t, float* y) {
  const double* xs[T];
  for (int k = 0; k < T; ++k) xs[k] = xd + (t + k) * x_stride;
  double out[T * R];
  Block<R, T>(data + r * cols, cols, xs, out);
  for (int k = 0; k < T; ++k) {
    for (int j = 0; j < R; ++j) {
      y[(t + k) * rows + r + j] = static_cast<float>(out[k * R + j]);
    }
  }
}

// Rows per block and tokens per tile: 4 x 2 uses 16 accumulators; four
// rows share each x load, two tokens share each widened weight.
constexpr int kRows = 4;
constexpr int kTokens = 2;

template <int R>
void RowBlock(const uint16_t* data, size_t rows, size_t cols, const double* xd,
              size_t x_stride, size_t n_tokens, size_t r, float* y) {
  size_t t = 0;
  for (; t + kTokens <= n_tokens; t += kTokens) {
    BlockToY<R, kTokens>(data, rows, cols, xd, x_stride, r, t, y);
  }
  for (; t < n_tokens; ++t) {
    BlockToY<R, 1>(data, rows, cols, xd, x_stride, r, t, y);
  }
}

// Batches of T >= 4 tokens. With a tile of T tokens on one row, each
// widened weight feeds T tokens' FMAs (the widening is the costly part:
// 6 of the 2T + 6 vector ops per 16 weights), but every FMA reads x: T
// tokens' x must then sit in L1, so the columns are cut into chunks of
// kChunkCols (T x 256 doubles: 16 KB at T = 8). For a block of kChunkRows
// rows, each chunk's x is loaded into L1 once and every row of the block
// runs its chunk against it, keeping its accumulators in `acc` between
// chunks (stored and reloaded exactly). Each lane still receives its
// columns in increasing order, so the bits are the Dot16 order's.
constexpr size_t kChunkCols = 256;
constexpr size_t kChunkRows = 32;

template <int T>
void ChunkedRows(const uint16_t* data, size_t rows, size_t cols,
                 const double* const* xd, size_t row_begin, size_t row_end,
                 float* y, size_t t0) {
  alignas(64) __m512d acc[kChunkRows][2 * T];
  const size_t full = cols & ~size_t{31};
  for (size_t rb = row_begin; rb < row_end; rb += kChunkRows) {
    const size_t nr = row_end - rb < kChunkRows ? row_end - rb : kChunkRows;
    for (size_t j = 0; j < nr; ++j) {
      for (int k = 0; k < 2 * T; ++k) acc[j][k] = _mm512_setzero_pd();
    }
    for (size_t c0 = 0; c0 < cols; c0 += kChunkCols) {
      const size_t c1 = c0 + kChunkCols < full ? c0 + kChunkCols : full;
      for (size_t j = 0; j < nr; ++j) {
        const uint16_t* w = data + (rb + j) * cols;
        __m512d p[1][T], q[1][T];
        for (int t = 0; t < T; ++t) {
          p[0][t] = acc[j][t];
          q[0][t] = acc[j][T + t];
        }
        // The next row's chunk, while this one computes.
        _mm_prefetch(reinterpret_cast<const char*>(w + cols + c0), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(w + cols + c0 + 32),
                     _MM_HINT_T0);
        for (size_t c = c0; c < c1; c += 32) {
          Step32<1, T, false>(w, cols, xd, c, ~__mmask32{0}, p, q);
        }
        if (c0 + kChunkCols >= cols && full < cols) {
          const __mmask32 tail = (__mmask32{1} << (cols - full)) - 1;
          Step32<1, T, false>(w, cols, xd, full, tail, p, q);
        }
        for (int t = 0; t < T; ++t) {
          acc[j][t] = p[0][t];
          acc[j][T + t] = q[0][t];
        }
      }
    }
    for (size_t j = 0; j < nr; ++j) {
      for (int t = 0; t < T; ++t) {
        y[(t0 + t) * rows + rb + j] =
            static_cast<float>(FoldPq(acc[j][t], acc[j][T + t]));
      }
    }
  }
}

}  // namespace

void Bf16RowsAvx512(const uint16_t* data, size_t rows, size_t cols,
                    const double* xd, size_t n_tokens, size_t row_begin,
                    size_t row_end, float* y) {
  const size_t x_stride = Bf16XStride(cols);
  // Tiles of 8, then 4 tokens, chunked (above); the rest in row blocks.
  size_t t0 = 0;
  for (; t0 + 8 <= n_tokens; t0 += 8) {
    const double* xs[8];
    for (int k = 0; k < 8; ++k) xs[k] = xd + (t0 + k) * x_stride;
    ChunkedRows<8>(data, rows, cols, xs, row_begin, row_end, y, t0);
  }
  for (; t0 + 4 <= n_tokens; t0 += 4) {
    const double* xs[4];
    for (int k = 0; k < 4; ++k) xs[k] = xd + (t0 + k) * x_stride;
    ChunkedRows<4>(data, rows, cols, xs, row_begin, row_end, y, t0);
  }
  if (t0 == n_tokens) return;
  xd += t0 * x_stride;
  y += t0 * rows;
  n_tokens -= t0;
  size_t r = row_begin;
  // Tokens loop inside a row block: the block's weights come from memory
  // once per batch and from L1 for the other tokens.
  for (; r + kRows <= row_end; r += kRows) {
    RowBlock<kRows>(data, rows, cols, xd, x_stride, n_tokens, r, y);
  }
  for (; r < row_end; ++r) {
    RowBlock<1>(data, rows, cols, xd, x_stride, n_tokens, r, y);
  }
}

}  // namespace flotilla::kernels::internal

#pragma GCC diagnostic pop
#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options
