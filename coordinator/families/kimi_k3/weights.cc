#include "coordinator/families/kimi_k3/weights.h"

#include <cstring>

namespace flotilla::coordinator {

kernels::DenseMatrix Matrix::view() const { return rows_view(0, rows); }

kernels::DenseMatrix Matrix::rows_view(size_t first, size_t count) const {
  kernels::DenseMatrix m;
  m.type = type;
  m.rows = count;
  m.cols = cols;
  const size_t esize = type == kernels::DenseType::kBF16 ? 2 : 4;
  m.data = static_cast<const uint8_t*>(data) + first * cols * esize;
  return m;
}

void Matrix::RowF32(size_t r, float* out) const {
  if (type == kernels::DenseType::kBF16) {
    const uint16_t* row = static_cast<const uint16_t*>(data) + r * cols;
    for (size_t i = 0; i < cols; ++i) out[i] = kernels::Bf16ToF32(row[i]);
  } else {
    std::memcpy(out, static_cast<const float*>(data) + r * cols,
                cols * sizeof(float));
  }
}

}  // namespace flotilla::coordinator
