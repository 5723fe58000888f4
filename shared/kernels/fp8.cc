#include "shared/kernels/fp8.h"

#include <cmath>
#include <limits>

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
      const int sign = code >> 7, exponent = (code >> 3) & 15, mantissa = code & 7;
      float v;
      if (exponent == 15 && mantissa == 7) {
        v = std::numeric_limits<float>::quiet_NaN();
      } else if (exponent == 0) {
        v = std::ldexp(static_cast<float>(mantissa) / 8.0f, -6);
      } else {
        v = std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
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
        return absl::InvalidArgumentError(absl::StrCat(
            "FP8 weight at row ", r, ", column ", c, " is NaN (code 0x",
            absl::Hex(code), ")"));
      }
      if (!(scale > 0.0f) || !std::isfinite(scale)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "FP8 block scale for row ", r, ", column ", c, " is ", scale,
            " (must be finite and positive)"));
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

void MatMulFp8(const Fp8BlockMatrix& w, const float* x, size_t n_tokens,
               float* y, ThreadPool* pool) {
  const size_t scale_cols = w.scale_cols();
  // Every level gives the same bits; the active one (kernels.h) runs.
  const SimdLevel level = ActiveSimdLevel();
  auto dot = [level](const uint8_t* codes, const float* scales, size_t cols,
                     const float* xt) {
    if (level == SimdLevel::kAvx512) {
      return internal::Fp8RowDotAvx512(codes, scales, cols, xt);
    }
    if (level == SimdLevel::kAvx2) {
      return internal::Fp8RowDotAvx2(codes, scales, cols, xt);
    }
    return RowDot(codes, scales, cols, xt);
  };
  ParallelFor(pool, w.rows, 16, [&](size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r) {
      const uint8_t* codes = w.codes + r * w.cols;
      const float* scales = w.scale_inv + (r / kFp8Block) * scale_cols;
      for (size_t t = 0; t < n_tokens; ++t) {
        y[t * w.rows + r] =
            static_cast<float>(dot(codes, scales, w.cols, x + t * w.cols));
      }
    }
  });
}

}  // namespace flotilla::kernels
