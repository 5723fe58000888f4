// A trunk weight matrix of whichever storage a checkpoint uses: dense (F32
// or BF16) or FP8 e4m3 with 128x128 block scales (DeepSeek-V3 / Kimi K2).
// A family's forward pass holds these instead of switching on the format,
// and the few non-matmul uses of a matrix (a range of rows' dot products, one
// row's values: MLA's absorbed key and value halves) read the
// weights in the same exact values MatMul multiplies by.
#ifndef FLOTILLA_SHARED_KERNELS_WEIGHT_MATRIX_H_
#define FLOTILLA_SHARED_KERNELS_WEIGHT_MATRIX_H_

#include <cstddef>

#include "shared/kernels/fp8.h"
#include "shared/kernels/kernels.h"

namespace flotilla::kernels {

struct WeightMatrix {
  bool fp8 = false;
  DenseMatrix dense;     // when !fp8
  Fp8BlockMatrix block;  // when fp8
  size_t rows() const { return fp8 ? block.rows : dense.rows; }
  size_t cols() const { return fp8 ? block.cols : dense.cols; }

  static WeightMatrix Dense(const DenseMatrix& m) {
    WeightMatrix w;
    w.dense = m;
    return w;
  }
  static WeightMatrix Fp8(const Fp8BlockMatrix& m) {
    WeightMatrix w;
    w.fp8 = true;
    w.block = m;
    return w;
  }
};

// Y[t][r] = sum_c W[r][c] X[t][c]: MatMul or MatMulFp8 (both in Dot16
// order, so a dequantised copy of an FP8 matrix gives the same bits).
void MatMul(const WeightMatrix& w, const float* x, size_t n_tokens, float* y,
            ThreadPool* pool);

// y[i] = row (first + i) of W times x, for i < count, one token, on the
// calling thread; the bits MatMul gives those rows.
void MatVecRows(const WeightMatrix& w, size_t first, size_t count,
                const float* x, float* y);

// out[c] = W[row][c] for every column, the element as MatMul reads it (an
// FP8 code times its block scale, in float; BF16 widened).
void RowValues(const WeightMatrix& w, size_t row, float* out);

}  // namespace flotilla::kernels

#endif  // FLOTILLA_SHARED_KERNELS_WEIGHT_MATRIX_H_
