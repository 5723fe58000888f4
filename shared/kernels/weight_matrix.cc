#include "shared/kernels/weight_matrix.h"

#include <algorithm>

namespace flotilla::kernels {

void MatMul(const WeightMatrix& w, const float* x, size_t n_tokens, float* y,
            ThreadPool* pool) {
  if (w.fp8) {
    MatMulFp8(w.block, x, n_tokens, y, pool);
  } else {
    MatMul(w.dense, x, n_tokens, y, pool);
  }
}

void MatVecRows(const WeightMatrix& w, size_t first, size_t count,
                const float* x, float* y) {
  if (!w.fp8) {
    DenseMatrix rows = w.dense;
    const size_t elem = w.dense.type == DenseType::kF32 ? 4 : 2;
    rows.data =
        static_cast<const char*>(w.dense.data) + first * w.dense.cols * elem;
    rows.rows = count;
    MatMul(rows, x, 1, y, nullptr);
    return;
  }
  MatVecFp8Rows(w.block, first, count, x, y);
}

void RowValues(const WeightMatrix& w, size_t row, float* out) {
  const size_t cols = w.cols();
  if (w.fp8) {
    DecodeFp8Row(w.block, row, out);
  } else if (w.dense.type == DenseType::kF32) {
    const float* r = static_cast<const float*>(w.dense.data) + row * cols;
    std::copy(r, r + cols, out);
  } else {
    const uint16_t* r = static_cast<const uint16_t*>(w.dense.data) + row * cols;
    for (size_t c = 0; c < cols; ++c) out[c] = Bf16ToF32(r[c]);
  }
}

}  // namespace flotilla::kernels
