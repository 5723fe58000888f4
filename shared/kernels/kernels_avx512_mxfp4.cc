// AVX-512 MXFP4 matmul, bit-identical to Mxfp4RowDot in kernels_scalar.cc.
//
// Per row and 32-column group the order is: lane i (0..7) =
// (col 2i + col 2i+16) + (col 2i+1 + col 2i+17), lanes folded i += i+4, +2,
// +1, the group sum times 2^(s-127), added to the row total. The nibble
// order of the packed bytes gives exactly these lanes: the low nibbles of
// bytes 0-7 are columns 0,2,..,14, of bytes 8-15 columns 16,..,30, and the
// high nibbles the odd columns. x arrives widened and permuted to match
// (Mxfp4PermuteX), so decoded weights are never shuffled.
//
// The expensive part of a naive version is the horizontal fold of each
// group. Eight rows are therefore processed together and folded as a
// transpose: three shuffle+add stages turn eight 8-lane vectors into one
// vector of eight group sums, each computed by exactly the scalar fold.
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

// The E2M1 table as doubles, for the two-register permute below.
alignas(64) const
    double kLut[16] = {0.0,  0.5,  1.0,  1.5,  2.0,  3.0,  4.0,  6.0,
                       -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0};

// Lane p of a folded 8-row vector holds row kRowOfLane[p] (see Fold8Rows);
// kLaneOfRow is the inverse.
constexpr int kRowOfLane[8] = {0, 4, 1, 5, 2, 6, 3, 7};
constexpr int kLaneOfRow[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// Groups whose scales are staged per call of the block kernel.
constexpr size_t kScaleChunk = 64;

struct Lut {
  __m512d lo, hi;
};

// Decodes one group (16 bytes) of one row and returns its 8 lanes against
// NT tokens' x (4 registers each: slots a, b, c, d).
template <int NT>
inline void GroupLanes(const uint8_t* p, const Lut& lut, const __m512d (*x)[4],
                       __m512d* lanes) {
  // vpermt2pd reads index bits 0-3 only: the low nibble needs no masking.
  const __m512i q0 = _mm512_cvtepu8_epi64(
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m512i q1 = _mm512_cvtepu8_epi64(
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8)));
  const __m512d wa = _mm512_permutex2var_pd(lut.lo, q0, lut.hi);
  const __m512d wb = _mm512_permutex2var_pd(lut.lo, q1, lut.hi);
  const __m512d wc =
      _mm512_permutex2var_pd(lut.lo, _mm512_srli_epi64(q0, 4), lut.hi);
  const __m512d wd =
      _mm512_permutex2var_pd(lut.lo, _mm512_srli_epi64(q1, 4), lut.hi);
  for (int k = 0; k < NT; ++k) {
    // Products are exact in double, so the FMAs round only the additions:
    // e0 = a + b, e1 = c + d, lane = e0 + e1.
    __m512d e0 = _mm512_mul_pd(wa, x[k][0]);
    e0 = _mm512_fmadd_pd(wb, x[k][1], e0);
    __m512d e1 = _mm512_mul_pd(wc, x[k][2]);
    e1 = _mm512_fmadd_pd(wd, x[k][3], e1);
    lanes[k] = _mm512_add_pd(e0, e1);
  }
}

// Fold stage 1 for rows a, b: [a_i + a_{i+4} (i<4), b_i + b_{i+4} (i<4)].
inline __m512d FoldStage1(__m512d a, __m512d b) {
  return _mm512_add_pd(_mm512_shuffle_f64x2(a, b, 0x44),
                       _mm512_shuffle_f64x2(a, b, 0xEE));
}

// Stage 2 for (a,b) from one stage-1 vector and (c,d) from another:
// [a_i + a_{i+2}, b.., c.., d..] for i < 2, in 128-bit chunks a, b, c, d.
inline __m512d FoldStage2(__m512d ab, __m512d cd) {
  return _mm512_add_pd(_mm512_shuffle_f64x2(ab, cd, 0x88),
                       _mm512_shuffle_f64x2(ab, cd, 0xDD));
}

// Stage 3 for rows 0-3 and 4-7: lane p = row kRowOfLane[p], l_0 + l_1.
inline __m512d FoldStage3(__m512d r0123, __m512d r4567) {
  return _mm512_add_pd(_mm512_unpacklo_pd(r0123, r4567),
                       _mm512_unpackhi_pd(r0123, r4567));
}

// Eight rows starting at `packed` (row stride `packed_stride`, scale row
// stride `groups`) against NT tokens; out[k * 8 + j] = total of row j.
template <int NT>
void Block8(const uint8_t* packed, size_t packed_stride, const uint8_t* scales,
            size_t groups, const double* const* xd, double* out) {
  const Lut lut = {_mm512_load_pd(kLut), _mm512_load_pd(kLut + 8)};
  __m512d total[NT];
  for (int k = 0; k < NT; ++k) total[k] = _mm512_setzero_pd();
  alignas(8) uint8_t staged[kScaleChunk][8];
  for (size_t g0 = 0; g0 < groups; g0 += kScaleChunk) {
    const size_t gn = groups - g0 < kScaleChunk ? groups - g0 : kScaleChunk;
    // Stage the 8 rows' scale bytes per group in the folded lane order.
    for (int j = 0; j < 8; ++j) {
      const uint8_t* s = scales + j * groups + g0;
      for (size_t g = 0; g < gn; ++g) staged[g][kLaneOfRow[j]] = s[g];
    }
    for (size_t g = 0; g < gn; ++g) {
      const size_t col = (g0 + g) * 32;
      __m512d x[NT][4];
      for (int k = 0; k < NT; ++k) {
        for (int q = 0; q < 4; ++q)
          x[k][q] = _mm512_loadu_pd(xd[k] + col + 8 * q);
      }
      const uint8_t* p = packed + col / 2;
      __m512d half[2][NT];
      for (int h = 0; h < 2; ++h) {
        __m512d pair[2][NT];
        for (int m = 0; m < 2; ++m) {
          __m512d v0[NT], v1[NT];
          const size_t row = 4 * h + 2 * m;
          GroupLanes<NT>(p + row * packed_stride, lut, x, v0);
          GroupLanes<NT>(p + (row + 1) * packed_stride, lut, x, v1);
          for (int k = 0; k < NT; ++k) pair[m][k] = FoldStage1(v0[k], v1[k]);
        }
        for (int k = 0; k < NT; ++k) {
          half[h][k] = FoldStage2(pair[0][k], pair[1][k]);
        }
      }
      // 2^(s-127) from its exponent bits (exact for s in [0, 254]); lanes
      // with s == 255 keep their total, as the scalar code skips the group.
      const __m512i s = _mm512_cvtepu8_epi64(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(staged[g])));
      const __mmask8 valid =
          _mm512_cmpneq_epi64_mask(s, _mm512_set1_epi64(255));
      const __m512d scale = _mm512_castsi512_pd(_mm512_slli_epi64(
          _mm512_add_epi64(s, _mm512_set1_epi64(1023 - 127)), 52));
      for (int k = 0; k < NT; ++k) {
        const __m512d sums = FoldStage3(half[0][k], half[1][k]);
        total[k] = _mm512_mask_add_pd(total[k], valid, total[k],
                                      _mm512_mul_pd(sums, scale));
      }
    }
  }
  for (int k = 0; k < NT; ++k) {
    alignas(64) double lanes[8];
    _mm512_store_pd(lanes, total[k]);
    for (int p = 0; p < 8; ++p) out[k * 8 + kRowOfLane[p]] = lanes[p];
  }
}

// One row against one token: the same order with a horizontal fold.
double Row1(const uint8_t* packed, const uint8_t* scales, size_t groups,
            const double* xd) {
  const Lut lut = {_mm512_load_pd(kLut), _mm512_load_pd(kLut + 8)};
  double total = 0.0;
  for (size_t g = 0; g < groups; ++g) {
    const uint64_t s = scales[g];
    if (s == 255) continue;
    __m512d x[1][4];
    for (int q = 0; q < 4; ++q) x[0][q] = _mm512_loadu_pd(xd + g * 32 + 8 * q);
    __m512d v;
    GroupLanes<1>(packed + g * 16, lut, x, &v);
    const __m256d v4 =
        _mm256_add_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd(v, 1));
    const __m128d v2 =
        _mm_add_pd(_mm256_castpd256_pd128(v4), _mm256_extractf128_pd(v4, 1));
    const double sum = _mm_cvtsd_f64(_mm_add_sd(v2, _mm_unpackhi_pd(v2, v2)));
    const uint64_t scale_bits = (s + 1023 - 127) << 52;
    double scale;
    __builtin_memcpy(&scale, &scale_bits, sizeof scale);
    total += sum * scale;
  }
  return total;
}

// Tokens per Block8 call: two keep the live vectors (2 x 4 x, 2 x 3 fold
// partials, 4 decoded weights, totals) within the 32 zmm registers.
constexpr size_t kTokenTile = 2;

}  // namespace

void Mxfp4RowsAvx512(const Mxfp4Matrix& w, const float* /*x*/, const double* xd,
                     size_t n_tokens, size_t row_begin, size_t row_end,
                     float* y) {
  const size_t cols = w.cols, groups = cols / 32, stride = cols / 2;
  size_t r = row_begin;
  // Tokens loop inside a block of 8 rows: the block (8 x 1.9 KB for a K3
  // expert row) is read from memory once and from L1 for later tokens.
  for (; r + 8 <= row_end; r += 8) {
    const uint8_t* packed = w.packed + r * stride;
    const uint8_t* scales = w.scales + r * groups;
    size_t t = 0;
    for (; t + kTokenTile <= n_tokens; t += kTokenTile) {
      const double* xs[kTokenTile] = {xd + t * cols, xd + (t + 1) * cols};
      double out[kTokenTile * 8];
      Block8<kTokenTile>(packed, stride, scales, groups, xs, out);
      for (size_t k = 0; k < kTokenTile; ++k) {
        for (int j = 0; j < 8; ++j) {
          y[(t + k) * w.rows + r + j] = static_cast<float>(out[k * 8 + j]);
        }
      }
    }
    for (; t < n_tokens; ++t) {
      const double* xs[1] = {xd + t * cols};
      double out[8];
      Block8<1>(packed, stride, scales, groups, xs, out);
      for (int j = 0; j < 8; ++j) {
        y[t * w.rows + r + j] = static_cast<float>(out[j]);
      }
    }
  }
  for (; r < row_end; ++r) {
    for (size_t t = 0; t < n_tokens; ++t) {
      y[t * w.rows + r] = static_cast<float>(Row1(
          w.packed + r * stride, w.scales + r * groups, groups, xd + t * cols));
    }
  }
}

}  // namespace flotilla::kernels::internal

#pragma GCC diagnostic pop
#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options
