// Internal interface between the dispatcher (kernels.cc) and the per-level
// implementations (kernels_scalar.cc, kernels_avx2.cc, kernels_avx512.cc).
//
// The SIMD translation units contain only plain functions over raw pointers
// and no standard-library templates: a template instantiated in a TU that is
// compiled for AVX-512 could be picked by the linker for the scalar callers
// too and crash a CPU without AVX-512. Threading, buffers and dispatch live
// in kernels.cc, which is compiled for the baseline ISA.
#ifndef FLOTILLA_SHARED_KERNELS_KERNELS_INTERNAL_H_
#define FLOTILLA_SHARED_KERNELS_KERNELS_INTERNAL_H_

#include <cstddef>
#include <cstdint>

#include "shared/kernels/fp8.h"
#include "shared/kernels/kernels.h"

#if defined(__x86_64__) || defined(_M_X64)
#define FLOTILLA_KERNELS_X86 1
#else
#define FLOTILLA_KERNELS_X86 0
#endif

namespace flotilla::kernels::internal {

// E2M1 nibble -> value (bit 3 is the sign). Index 8 is -0.0.
extern const float kE2m1Lut[16];
// A packed byte -> its two values as doubles: [2b] the low nibble's (the
// even column), [2b + 1] the high nibble's.
struct E2m1PairTable {
  double v[512];
};
extern const E2m1PairTable kE2m1Pairs;

// Computes y[t * w.rows + r] for r in [row_begin, row_end), t < n_tokens,
// with x[t * w.cols + c]. Each element is one Dot16-order dot product.
// `xd` is x prepared by the table's bf16_prep (bf16 weights only), or null.
using DenseRowsFn = void (*)(const DenseMatrix& w, const float* x,
                             const double* xd, size_t n_tokens,
                             size_t row_begin, size_t row_end, float* y);

// Widens one token's x for a level's bf16 kernel; writes Bf16XStride(cols)
// doubles.
using DensePrepFn = void (*)(const float* x, size_t cols, double* xd);

// Same for MXFP4. `x` is the natural [n_tokens][cols] input (used by the
// scalar reference); `xd` is the same input widened to double and permuted
// per 32-column group into the SIMD lane layout (see Mxfp4PermuteX), or null
// for the scalar level.
using Mxfp4RowsFn = void (*)(const Mxfp4Matrix& w, const float* x,
                             const double* xd, size_t n_tokens,
                             size_t row_begin, size_t row_end, float* y);

using DotFn = double (*)(const float* a, const float* b, size_t n);

// Widens one token's x (cols % 32 == 0) for a level's MXFP4 kernel; writes
// cols doubles.
using Mxfp4PrepFn = void (*)(const float* x, size_t cols, double* xd);

// DotF32Rows and AddWeightedRows (kernels.h) at one level.
using DotRowsFn = void (*)(const float* a, const float* rows, size_t stride,
                           size_t count, size_t n, float* out);
using AddWeightedRowsFn = void (*)(const float* w, const float* rows,
                                   size_t stride, size_t count, size_t n,
                                   float* acc);

// The Dot32 tree (kernels.h) over 32 float lanes in column order, in place:
// i += i+16, +8, +4, +2, then lane 0 + lane 1. `static`: an inline function
// emitted by a SIMD file could otherwise be the copy the linker keeps for
// the baseline callers too (see above).
static inline float Tree32(float* lane) {
  for (int i = 0; i < 16; ++i) lane[i] += lane[i + 16];
  for (int i = 0; i < 8; ++i) lane[i] += lane[i + 8];
  for (int i = 0; i < 4; ++i) lane[i] += lane[i + 4];
  for (int i = 0; i < 2; ++i) lane[i] += lane[i + 2];
  return lane[0] + lane[1];
}

struct KernelTable {
  DotFn dot_f32;
  DenseRowsFn dense_rows;
  Mxfp4RowsFn mxfp4_rows;
  DensePrepFn bf16_prep;   // null: the level's bf16 kernel reads x directly
  Mxfp4PrepFn mxfp4_prep;  // null: the level's MXFP4 kernel reads x directly
  DotRowsFn dot_f32_rows;
  AddWeightedRowsFn add_weighted_rows;
};

// Widens x (one token, `cols` floats, cols % 32 == 0) to double in the lane
// layout the SIMD MXFP4 kernels read: within each 32-column group g, slots
// 0..7 hold columns 2i, 8..15 hold 16+2i, 16..23 hold 2i+1, 24..31 hold
// 17+2i (i = 0..7). This matches the nibble order of the packed bytes, so
// the kernels never shuffle the decoded weights.
void Mxfp4PermuteX(const float* x, size_t cols, double* xd);

// The AVX-512 MXFP4 kernel (its own file, kernels_avx512_mxfp4.cc).
void Mxfp4RowsAvx512(const Mxfp4Matrix& w, const float* x, const double* xd,
                     size_t n_tokens, size_t row_begin, size_t row_end,
                     float* y);

// x for the AVX-512 bf16 kernel (kernels_avx512_bf16.cc explains the
// layout): per 32 columns, slots 0-7 hold cols 0-3 and 8-11, slots 8-15
// cols 16-19 and 24-27, 16-23 cols 4-7 and 12-15, 24-31 cols 20-23 and
// 28-31; the last block is zero-padded to 32 columns.
inline size_t Bf16XStride(size_t cols) { return (cols + 31) & ~size_t{31}; }
void Bf16PermuteX(const float* x, size_t cols, double* xd);
void Bf16RowsAvx512(const uint16_t* data, size_t rows, size_t cols,
                    const double* xd, size_t n_tokens, size_t row_begin,
                    size_t row_end, float* y);

// MatMulFp8's rows (fp8.h) at the SIMD levels, e4m3 decoded by bit
// arithmetic: y[t * m.rows + r - y_row0] for r in [row_begin, row_end),
// t < n_tokens, bit-identical to fp8.cc's scalar rows. `xd` is x widened to
// double, Fp8XStride(cols) per token, zero past the columns; `scratch`
// holds Fp8XStride(cols) floats (one decoded row, for several tokens).
inline size_t Fp8XStride(size_t cols) { return (cols + 15) & ~size_t{15}; }
void Fp8RowsAvx2(const Fp8BlockMatrix& m, const double* xd, size_t n_tokens,
                 size_t row_begin, size_t row_end, float* scratch, float* y,
                 size_t y_row0);
void Fp8RowsAvx512(const Fp8BlockMatrix& m, const double* xd, size_t n_tokens,
                   size_t row_begin, size_t row_end, float* scratch, float* y,
                   size_t y_row0);
// One row's weights, out[c] = e4m3(codes[c]) * scales[c / 128] in float:
// the values the rows above multiply by.
void Fp8DecodeRowAvx2(const uint8_t* codes, const float* scales, size_t cols,
                      float* out);
void Fp8DecodeRowAvx512(const uint8_t* codes, const float* scales, size_t cols,
                        float* out);

// DotF32Rows, AddWeightedRows and their Many forms (kernels.h) at the
// AVX-512 level (kernels_avx512_attention.cc).
void DotStridedRowsAvx512(const float* a, const float* rows, size_t stride,
                          size_t count, size_t n, float* out);
void AddWeightedRowsAvx512(const float* w, const float* rows, size_t stride,
                           size_t count, size_t n, float* acc);
void DotF32RowsManyAvx512(const float* a, size_t a_stride, size_t a_count,
                          const float* rows, size_t row_stride,
                          size_t row_count, size_t n, float* out,
                          size_t out_stride);
void AddWeightedRowsManyAvx512(const float* w, size_t w_stride, size_t w_count,
                               const float* rows, size_t row_stride,
                               size_t row_count, size_t n, float* acc,
                               size_t acc_stride);

// Tables for each level. The SIMD ones are only valid when the CPU supports
// them; the dispatcher checks that before handing them out. The x86 files
// are compiled on x86-64 only (FLOTILLA_KERNELS_X86); Highway's table is
// valid everywhere (its dispatcher picks a target the CPU has).
const KernelTable& ScalarTable();
#if FLOTILLA_KERNELS_X86
const KernelTable& Avx2Table();
const KernelTable& Avx512Table();
#endif
const KernelTable& HighwayTable();
// Highway's target on this CPU ("AVX3", "NEON", ...).
const char* HighwayTargetName();

}  // namespace flotilla::kernels::internal

#endif  // FLOTILLA_SHARED_KERNELS_KERNELS_INTERNAL_H_
