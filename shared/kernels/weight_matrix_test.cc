// kernels::WeightMatrix: an FP8 block-scaled matrix and its dequantised
// copy give the same bits through MatMul, MatVecRows (any row range, across
// block rows) and RowValues; so do a BF16 matrix and its f32 widening.
#include "shared/kernels/weight_matrix.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace flotilla::kernels {
namespace {

TEST(WeightMatrixTest, Fp8AndItsDequantisedCopyAgreeBitForBit) {
  const size_t rows = 300, cols = 200;  // partial blocks both ways
  std::vector<uint8_t> codes(rows * cols);
  for (size_t i = 0; i < codes.size(); ++i) {
    const uint8_t c = static_cast<uint8_t>((i * 53) % 256);
    codes[i] = (c & 0x7f) == 0x7f ? 0x01 : c;
  }
  std::vector<float> scales(3 * 2);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = 1e-3f * (i + 1);
  const Fp8BlockMatrix block{codes.data(), scales.data(), rows, cols};
  std::vector<float> dense(rows * cols);
  ASSERT_TRUE(DequantizeFp8Rows(block, 0, rows, dense.data()).ok());
  const WeightMatrix fp8 = WeightMatrix::Fp8(block);
  const WeightMatrix f32 =
      WeightMatrix::Dense({DenseType::kF32, dense.data(), rows, cols});
  EXPECT_EQ(fp8.rows(), rows);
  EXPECT_EQ(fp8.cols(), cols);
  std::vector<float> x(2 * cols);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.21f * i);

  for (SimdLevel level :
       {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (SetSimdLevel(level) != level) continue;  // not on this CPU
    SCOPED_TRACE(SimdLevelName(level));
    std::vector<float> a(2 * rows), b(2 * rows);
    MatMul(fp8, x.data(), 2, a.data(), nullptr);
    MatMul(f32, x.data(), 2, b.data(), nullptr);
    EXPECT_EQ(a, b);
    // Rows 120..139 cross from block row 0 into 1; the result is MatMul's.
    std::vector<float> ra(20), rb(20);
    MatVecRows(fp8, 120, 20, x.data(), ra.data());
    MatVecRows(f32, 120, 20, x.data(), rb.data());
    EXPECT_EQ(ra, rb);
    for (size_t i = 0; i < 20; ++i) EXPECT_EQ(ra[i], a[120 + i]) << i;
    // Each row's values, SIMD tail included (200 = 12 x 16 + 8).
    std::vector<float> values(cols);
    for (size_t r : {0, 127, 128, 257, 299}) {
      RowValues(fp8, r, values.data());
      for (size_t c = 0; c < cols; ++c) {
        ASSERT_EQ(values[c], dense[r * cols + c]) << r << "," << c;
      }
    }
  }
  SetSimdLevel(SimdLevel::kAuto);

  std::vector<float> row_a(cols), row_b(cols);
  RowValues(fp8, 257, row_a.data());
  RowValues(f32, 257, row_b.data());
  EXPECT_EQ(row_a, row_b);
  EXPECT_EQ(row_a[3], dense[257 * cols + 3]);
}

TEST(WeightMatrixTest, Bf16RowsAreTheWidenedValues) {
  const size_t rows = 5, cols = 40;
  std::vector<uint16_t> bits(rows * cols);
  std::vector<float> wide(rows * cols);
  for (size_t i = 0; i < bits.size(); ++i) {
    bits[i] = static_cast<uint16_t>(0x3c00 + i * 7);
    wide[i] = Bf16ToF32(bits[i]);
  }
  const WeightMatrix bf16 =
      WeightMatrix::Dense({DenseType::kBF16, bits.data(), rows, cols});
  const WeightMatrix f32 =
      WeightMatrix::Dense({DenseType::kF32, wide.data(), rows, cols});
  std::vector<float> x(cols, 0.25f), a(2), b(2);
  MatVecRows(bf16, 3, 2, x.data(), a.data());
  MatVecRows(f32, 3, 2, x.data(), b.data());
  EXPECT_EQ(a, b);
  std::vector<float> row_a(cols), row_b(cols);
  RowValues(bf16, 4, row_a.data());
  RowValues(f32, 4, row_b.data());
  EXPECT_EQ(row_a, row_b);
}

}  // namespace
}  // namespace flotilla::kernels
