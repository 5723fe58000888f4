#include "shared/kernels/fp8.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

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

absl::Status DequantizeFp8Rows(const Fp8BlockMatrix& w, size_t row_begin,
                               size_t row_end, float* out) {
  const float* lut = Table().value;
  const size_t scale_cols = w.scale_cols();
  for (size_t r = row_begin; r < row_end; ++r) {
    const uint8_t* codes = w.codes + r * w.cols;
    const float* scales = w.scale_inv + (r / kFp8Block) * scale_cols;
    float* row = out + (r - row_begin) * w.cols;
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
      row[c] = lut[code] * scale;
    }
  }
  return absl::OkStatus();
}

}  // namespace flotilla::kernels
