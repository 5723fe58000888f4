// Scalar reference kernels. These define the reduction orders; the SIMD
// levels reproduce them operation for operation, so every level gives the
// same bits. Products of two floats (or an E2M1 value and a float) are exact
// in double, so in the double orders only the order of the additions
// matters; the float orders of attention use one std::fma per product (a
// single rounding, as every SIMD FMA does).
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "shared/kernels/kernels.h"
#include "shared/kernels/kernels_internal.h"

namespace flotilla::kernels::internal {

const float kE2m1Lut[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,
                            4.0f,  6.0f,  -0.0f, -0.5f, -1.0f, -1.5f,
                            -2.0f, -3.0f, -4.0f, -6.0f};

// From kE2m1Lut above (constant-initialised, so ready before this runs).
const E2m1PairTable kE2m1Pairs = [] {
  E2m1PairTable t{};
  for (int b = 0; b < 256; ++b) {
    t.v[2 * b] = kE2m1Lut[b & 15];
    t.v[2 * b + 1] = kE2m1Lut[b >> 4];
  }
  return t;
}();

namespace {

// Folds the 16 Dot16 lanes: i += i+8, then +4, +2, +1.
double Tree16(double* lane) {
  for (int i = 0; i < 8; ++i) lane[i] += lane[i + 8];
  for (int i = 0; i < 4; ++i) lane[i] += lane[i + 4];
  for (int i = 0; i < 2; ++i) lane[i] += lane[i + 2];
  return lane[0] + lane[1];
}

inline float LoadWeight(const float* w, size_t c) { return w[c]; }
inline float LoadWeight(const uint16_t* w, size_t c) { return Bf16ToF32(w[c]); }

// Dot16: lane c % 16 accumulates column c in increasing c. Lanes start at
// +0.0, so a lane that never receives a product stays +0.0; SIMD tails that
// add zero-padded products therefore leave the lane unchanged.
template <typename W>
double Dot16(const W* w, const float* x, size_t n) {
  double lane[16] = {};
  for (size_t c = 0; c < n; ++c) {
    lane[c % 16] +=
        static_cast<double>(LoadWeight(w, c)) * static_cast<double>(x[c]);
  }
  return Tree16(lane);
}

double DotScalar(const float* a, const float* b, size_t n) {
  return Dot16(a, b, n);
}

template <typename W>
void DenseRowsT(const W* data, size_t rows, size_t cols, const float* x,
                size_t n_tokens, size_t row_begin, size_t row_end, float* y) {
  for (size_t r = row_begin; r < row_end; ++r) {
    const W* row = data + r * cols;
    for (size_t t = 0; t < n_tokens; ++t) {
      y[t * rows + r] = static_cast<float>(Dot16(row, x + t * cols, cols));
    }
  }
}

void DenseRowsScalar(const DenseMatrix& w, const float* x, const double* /*xd*/,
                     size_t n_tokens, size_t row_begin, size_t row_end,
                     float* y) {
  if (w.type == DenseType::kBF16) {
    DenseRowsT(static_cast<const uint16_t*>(w.data), w.rows, w.cols, x,
               n_tokens, row_begin, row_end, y);
  } else {
    DenseRowsT(static_cast<const float*>(w.data), w.rows, w.cols, x, n_tokens,
               row_begin, row_end, y);
  }
}

// One MXFP4 row times one token, in the documented order (kernels.h):
// per group, lane i = (col 2i + col 2i+16) + (col 2i+1 + col 2i+17), the 8
// lanes folded i += i+4, +2, +1, times 2^(s-127); groups added in order.
double Mxfp4RowDot(const uint8_t* packed, const uint8_t* scales, size_t cols,
                   const float* x) {
  double total = 0.0;
  for (size_t g = 0; g < cols / 32; ++g) {
    const unsigned s = scales[g];
    if (s == 255) continue;  // E8M0 NaN: the group contributes nothing.
    const uint8_t* p = packed + g * 16;
    const float* xg = x + g * 32;
    double lane[8];
    for (int i = 0; i < 8; ++i) {
      const double pa = static_cast<double>(kE2m1Lut[p[i] & 15]) * xg[2 * i];
      const double pb =
          static_cast<double>(kE2m1Lut[p[i + 8] & 15]) * xg[2 * i + 16];
      const double pc =
          static_cast<double>(kE2m1Lut[p[i] >> 4]) * xg[2 * i + 1];
      const double pd =
          static_cast<double>(kE2m1Lut[p[i + 8] >> 4]) * xg[2 * i + 17];
      lane[i] = (pa + pb) + (pc + pd);
    }
    for (int i = 0; i < 4; ++i) lane[i] += lane[i + 4];
    for (int i = 0; i < 2; ++i) lane[i] += lane[i + 2];
    const double group = lane[0] + lane[1];
    // 2^(s-127) is a normal double for every s in [0, 254]: exact scaling.
    total += group * std::ldexp(1.0, static_cast<int>(s) - 127);
  }
  return total;
}

void Mxfp4RowsScalar(const Mxfp4Matrix& w, const float* x, const double* xd,
                     size_t n_tokens, size_t row_begin, size_t row_end,
                     float* y) {
  const size_t packed_cols = w.cols / 2;
  const size_t scale_cols = w.cols / 32;
  for (size_t r = row_begin; r < row_end; ++r) {
    for (size_t t = 0; t < n_tokens; ++t) {
      y[t * w.rows + r] = static_cast<float>(
          Mxfp4RowDot(w.packed + r * packed_cols, w.scales + r * scale_cols,
                      w.cols, x + t * w.cols));
    }
  }
}

}  // namespace

void Mxfp4PermuteX(const float* x, size_t cols, double* xd) {
  for (size_t g = 0; g < cols / 32; ++g) {
    const float* xg = x + g * 32;
    double* out = xd + g * 32;
    for (int i = 0; i < 8; ++i) {
      out[i] = xg[2 * i];
      out[8 + i] = xg[16 + 2 * i];
      out[16 + i] = xg[2 * i + 1];
      out[24 + i] = xg[17 + 2 * i];
    }
  }
}

void Bf16PermuteX(const float* x, size_t cols, double* xd) {
  const size_t padded = Bf16XStride(cols);
  for (size_t base = 0; base < padded; base += 32) {
    for (int slot = 0; slot < 32; ++slot) {
      // Slot groups of 8 start at columns 0, 16, 4, 20; within a group the
      // first four slots are consecutive columns, the next four are +8.
      static constexpr int kGroupStart[4] = {0, 16, 4, 20};
      const int i = slot % 8;
      const size_t c = base + kGroupStart[slot / 8] + (i < 4 ? i : i + 4);
      xd[base + slot] = c < cols ? x[c] : 0.0;
    }
  }
}

void DotStridedRowsScalar(const float* a, const float* rows, size_t stride,
                          size_t count, size_t n, float* out) {
  for (size_t j = 0; j < count; ++j) {
    const float* row = rows + j * stride;
    float lane[32] = {};
    for (size_t c = 0; c < n; ++c) {
      lane[c % 32] = std::fma(a[c], row[c], lane[c % 32]);
    }
    out[j] = Tree32(lane);
  }
}

void AddWeightedRowsScalar(const float* w, const float* rows, size_t stride,
                           size_t count, size_t n, float* acc) {
  for (size_t j = 0; j < count; ++j) {
    const float* row = rows + j * stride;
    for (size_t i = 0; i < n; ++i) acc[i] = std::fma(w[j], row[i], acc[i]);
  }
}

const KernelTable& ScalarTable() {
  static const KernelTable table = {
      &DotScalar, &DenseRowsScalar,      &Mxfp4RowsScalar,      nullptr,
      nullptr,    &DotStridedRowsScalar, &AddWeightedRowsScalar};
  return table;
}

}  // namespace flotilla::kernels::internal
