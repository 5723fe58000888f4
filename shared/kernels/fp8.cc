#include "shared/kernels/fp8.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shared/kernels/kernels.h"
#include "shared/kernels/kernels_internal.h"
#include "shared/kernels/thread_pool.h"

namespace flotilla::kernels {
namespace {

struct E4m3Table {
  float value[256];
  E4m3Table() {
    for (int code = 0; code < 256; ++code) {
      const int sign = code >> 7, exponent = (code >> 3) & 15,
                mantissa = code & 7;
      float v;
      if (exponent == 15 && mantissa == 7) {
        v = std::numeric_limits<float>::quiet_NaN();
      } else if (exponent == 0) {
        v = std::ldexp(static_cast<float>(mantissa) / 8.0f, -6);
      } else {
        v = std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f,
                       exponent - 7);
      }
      value[code] = sign ? -v : v;
    }
  }
};

const E4m3Table& Table() {
  static const E4m3Table* const table = new E4m3Table;
  return *table;
}

}  // namespace

float E4m3ToF32(uint8_t code) { return Table().value[code]; }

namespace {

// Dequantises (out non-null) or only checks rows [row_begin, row_end).
absl::Status Rows(const Fp8BlockMatrix& w, size_t row_begin, size_t row_end,
                  float* out) {
  const float* lut = Table().value;
  const size_t scale_cols = w.scale_cols();
  for (size_t r = row_begin; r < row_end; ++r) {
    const uint8_t* codes = w.codes + r * w.cols;
    const float* scales = w.scale_inv + (r / kFp8Block) * scale_cols;
    float* row = out == nullptr ? nullptr : out + (r - row_begin) * w.cols;
    for (size_t c = 0; c < w.cols; ++c) {
      const uint8_t code = codes[c];
      const float scale = scales[c / kFp8Block];
      if ((code & 0x7f) == 0x7f) {
        return absl::InvalidArgumentError(
            absl::StrCat("FP8 weight at row ", r, ", column ", c,
                         " is NaN (code 0x", absl::Hex(code), ")"));
      }
      if (!(scale > 0.0f) || !std::isfinite(scale)) {
        return absl::InvalidArgumentError(
            absl::StrCat("FP8 block scale for row ", r, ", column ", c, " is ",
                         scale, " (must be finite and positive)"));
      }
      if (row != nullptr) row[c] = lut[code] * scale;
    }
  }
  return absl::OkStatus();
}

// One row times one token in Dot16 order: lane c % 16 takes column c in
// increasing c; then the lanes fold 8, 4, 2, 1 (kernels_scalar.cc).
double RowDot(const uint8_t* codes, const float* scales, size_t cols,
              const float* x) {
  const float* lut = Table().value;
  double lane[16] = {};
  for (size_t c = 0; c < cols; ++c) {
    const float weight = lut[codes[c]] * scales[c / kFp8Block];
    lane[c % 16] += static_cast<double>(weight) * static_cast<double>(x[c]);
  }
  for (int i = 0; i < 8; ++i) lane[i] += lane[i + 8];
  for (int i = 0; i < 4; ++i) lane[i] += lane[i + 4];
  for (int i = 0; i < 2; ++i) lane[i] += lane[i + 2];
  return lane[0] + lane[1];
}

}  // namespace

absl::Status DequantizeFp8Rows(const Fp8BlockMatrix& w, size_t row_begin,
                               size_t row_end, float* out) {
  return Rows(w, row_begin, row_end, out);
}

absl::Status CheckFp8Matrix(const Fp8BlockMatrix& w) {
  return Rows(w, 0, w.rows, nullptr);
}

namespace {

// Rows [begin, end) of y[t * w.rows + r - y_row0] at the active level;
// `xd` is x widened (SIMD levels), `scratch` Fp8XStride(cols) floats.
void Rows(const Fp8BlockMatrix& w, const float* x, const double* xd,
          size_t n_tokens, size_t begin, size_t end, float* scratch, float* y,
          size_t y_row0) {
#if FLOTILLA_KERNELS_X86
  const SimdLevel level = ActiveSimdLevel();
  if (level == SimdLevel::kAvx512) {
    internal::Fp8RowsAvx512(w, xd, n_tokens, begin, end, scratch, y, y_row0);
    return;
  }
  if (level == SimdLevel::kAvx2) {
    internal::Fp8RowsAvx2(w, xd, n_tokens, begin, end, scratch, y, y_row0);
    return;
  }
#endif
  const size_t scale_cols = w.scale_cols();
  for (size_t r = begin; r < end; ++r) {
    const uint8_t* codes = w.codes + r * w.cols;
    const float* scales = w.scale_inv + (r / kFp8Block) * scale_cols;
    for (size_t t = 0; t < n_tokens; ++t) {
      y[t * w.rows + r - y_row0] =
          static_cast<float>(RowDot(codes, scales, w.cols, x + t * w.cols));
    }
  }
}

// x widened to double for the SIMD rows, Fp8XStride(cols) per token, zero
// past the columns: once per call, not per row.
void WidenX(const float* x, size_t cols, size_t n_tokens,
            std::vector<double>* xd) {
  const size_t stride = internal::Fp8XStride(cols);
  xd->assign(n_tokens * stride, 0.0);
  for (size_t t = 0; t < n_tokens; ++t) {
    for (size_t c = 0; c < cols; ++c) (*xd)[t * stride + c] = x[t * cols + c];
  }
}

}  // namespace

void MatMulFp8(const Fp8BlockMatrix& w, const float* x, size_t n_tokens,
               float* y, ThreadPool* pool) {
  // With several tokens each row is decoded once for all of them; never a
  // widened copy of the matrix.
  std::vector<double> xd;
  WidenX(x, w.cols, n_tokens, &xd);
  ParallelFor(pool, w.rows, 16, [&](size_t begin, size_t end) {
    std::vector<float> scratch(n_tokens > 1 ? internal::Fp8XStride(w.cols) : 0,
                               0.0f);
    Rows(w, x, xd.data(), n_tokens, begin, end, scratch.data(), y, 0);
  });
}

void DecodeFp8Row(const Fp8BlockMatrix& w, size_t row, float* out) {
  const uint8_t* codes = w.codes + row * w.cols;
  const float* scales = w.scale_inv + (row / kFp8Block) * w.scale_cols();
#if FLOTILLA_KERNELS_X86
  const SimdLevel level = ActiveSimdLevel();
  if (level == SimdLevel::kAvx512) {
    internal::Fp8DecodeRowAvx512(codes, scales, w.cols, out);
    return;
  }
  if (level == SimdLevel::kAvx2) {
    internal::Fp8DecodeRowAvx2(codes, scales, w.cols, out);
    return;
  }
#endif
  const float* lut = Table().value;
  for (size_t c = 0; c < w.cols; ++c) {
    out[c] = lut[codes[c]] * scales[c / kFp8Block];
  }
}

void MatVecFp8Rows(const Fp8BlockMatrix& w, size_t first, size_t count,
                   const float* x, float* y) {
  thread_local std::vector<double> xd;
  WidenX(x, w.cols, 1, &xd);
  Rows(w, x, xd.data(), 1, first, first + count, nullptr, y, first);
}

}  // namespace flotilla::kernels
