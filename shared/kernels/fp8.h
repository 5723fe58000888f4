// FP8 e4m3 ("float8_e4m3fn") weights with 128x128 block scales, as the
// DeepSeek-V3 / Kimi K2 releases store them: W[i][j] =
// float32(e4m3(q[i][j]) * scale_inv[i / 128][j / 128]), one IEEE float
// multiply, edge blocks partial (the index still divides by 128). This is
// Hugging Face's Fp8Dequantize and DeepSeek's weight_dequant.
//
// e4m3: sign, 4 exponent bits (bias 7), 3 mantissa bits; (1 + m/8) *
// 2^(e-7) for e >= 1, (m/8) * 2^-6 for e == 0; no infinities; S.1111.111
// (0x7F, 0xFF) is NaN, which the releases never hold and this code refuses.
#ifndef FLOTILLA_SHARED_KERNELS_FP8_H_
#define FLOTILLA_SHARED_KERNELS_FP8_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace flotilla::kernels {

inline constexpr size_t kFp8Block = 128;

// The value of an e4m3 byte (NaN for 0x7F and 0xFF).
float E4m3ToF32(uint8_t code);

// A row-major FP8 matrix [rows][cols] and its float32 block scales
// [ceil(rows/128)][ceil(cols/128)].
struct Fp8BlockMatrix {
  const uint8_t* codes = nullptr;
  const float* scale_inv = nullptr;
  size_t rows = 0;
  size_t cols = 0;
  size_t scale_rows() const { return (rows + kFp8Block - 1) / kFp8Block; }
  size_t scale_cols() const { return (cols + kFp8Block - 1) / kFp8Block; }
};

// Dequantises rows [row_begin, row_end) into out[(r - row_begin) * cols +
// c]. InvalidArgument naming the row and column of a NaN code, or of a
// scale that is not finite and positive.
absl::Status DequantizeFp8Rows(const Fp8BlockMatrix& w, size_t row_begin,
                               size_t row_end, float* out);

class ThreadPool;

// Y[t][r] = sum_c W[r][c] * X[t][c] computed on the FP8 bytes, with W's
// elements made as DequantizeFp8Rows makes them (one float multiply by the
// block's scale) and summed in MatMul's Dot16 order (kernels.h), so the
// result equals MatMul over the dequantised matrix bit for bit, without a
// widened copy of the weights, at the active SIMD level (scalar, AVX2,
// AVX-512: the same bits at each); parallel over rows. The
// matrix must have passed CheckFp8Matrix (no NaN codes, positive scales).
void MatMulFp8(const Fp8BlockMatrix& w, const float* x, size_t n_tokens,
               float* y, ThreadPool* pool);

// out[c] = W[row][c] as DequantizeFp8Rows makes it, at the active SIMD
// level (the same bits at each); the matrix must have passed
// CheckFp8Matrix. For the few single-row reads outside a matvec (MLA's
// absorbed keys).
void DecodeFp8Row(const Fp8BlockMatrix& w, size_t row, float* out);

// y[i] = row (first + i) of W times x for i < count, one token, on the
// calling thread; the bits MatMulFp8 gives those rows.
void MatVecFp8Rows(const Fp8BlockMatrix& w, size_t first, size_t count,
                   const float* x, float* y);

// What MatMulFp8 assumes, checked once when a weight is loaded: the errors
// of DequantizeFp8Rows, without writing the values.
absl::Status CheckFp8Matrix(const Fp8BlockMatrix& w);

}  // namespace flotilla::kernels

#endif  // FLOTILLA_SHARED_KERNELS_FP8_H_
