#include "shared/kernels/fp8.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "shared/kernels/kernels.h"
#include "shared/kernels/thread_pool.h"

namespace flotilla::kernels {
namespace {

TEST(Fp8Test, E4m3CodesDecodeAsTheFormatSays) {
  EXPECT_EQ(E4m3ToF32(0x00), 0.0f);
  EXPECT_TRUE(std::signbit(E4m3ToF32(0x80)));            // -0
  EXPECT_EQ(E4m3ToF32(0x38), 1.0f);                      // e=7, m=0
  EXPECT_EQ(E4m3ToF32(0x7E), 448.0f);                    // the largest
  EXPECT_EQ(E4m3ToF32(0xFE), -448.0f);
  EXPECT_EQ(E4m3ToF32(0x01), std::ldexp(1.0f, -9));      // smallest subnormal
  EXPECT_EQ(E4m3ToF32(0x07), std::ldexp(7.0f / 8, -6));  // largest subnormal
  EXPECT_EQ(E4m3ToF32(0x08), std::ldexp(1.0f, -6));      // smallest normal
  EXPECT_EQ(E4m3ToF32(0x3D), 1.625f);                    // 1 + 5/8
  EXPECT_TRUE(std::isnan(E4m3ToF32(0x7F)));
  EXPECT_TRUE(std::isnan(E4m3ToF32(0xFF)));
  // Positive codes are ordered: each decodes above the one before.
  for (int code = 1; code < 0x7F; ++code) {
    EXPECT_LT(E4m3ToF32(code - 1), E4m3ToF32(code)) << code;
  }
}

TEST(Fp8Test, PartialEdgeBlocksUseTheirOwnScale) {
  // 130 x 129: four blocks, three of them partial.
  const size_t rows = 130, cols = 129;
  std::vector<uint8_t> codes(rows * cols);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i % 0x7E);
  const std::vector<float> scales = {0.5f, 2.0f, 3.0f, 0.25f};
  const Fp8BlockMatrix w{codes.data(), scales.data(), rows, cols};
  EXPECT_EQ(w.scale_rows(), 2u);
  EXPECT_EQ(w.scale_cols(), 2u);
  std::vector<float> out(rows * cols);
  ASSERT_TRUE(DequantizeFp8Rows(w, 0, rows, out.data()).ok());
  for (size_t r : {size_t{0}, size_t{127}, size_t{128}, size_t{129}}) {
    for (size_t c : {size_t{0}, size_t{127}, size_t{128}}) {
      const float scale = scales[(r / 128) * 2 + c / 128];
      EXPECT_EQ(out[r * cols + c], E4m3ToF32(codes[r * cols + c]) * scale)
          << r << "," << c;
    }
  }
  // A row range lands at the start of `out`.
  std::vector<float> tail(cols);
  ASSERT_TRUE(DequantizeFp8Rows(w, 129, 130, tail.data()).ok());
  EXPECT_EQ(tail[128], out[129 * cols + 128]);
}

TEST(Fp8Test, NanCodesAndBadScalesAreRefusedByPosition) {
  std::vector<uint8_t> codes(4, 0x38);
  std::vector<float> scale = {1.0f};
  std::vector<float> out(4);
  codes[3] = 0xFF;
  absl::Status s = DequantizeFp8Rows({codes.data(), scale.data(), 2, 2}, 0, 2,
                                     out.data());
  EXPECT_EQ(s.message(), "FP8 weight at row 1, column 1 is NaN (code 0xff)");
  codes[3] = 0x38;
  scale[0] = 0.0f;
  s = DequantizeFp8Rows({codes.data(), scale.data(), 2, 2}, 0, 2, out.data());
  EXPECT_EQ(s.message(),
            "FP8 block scale for row 0, column 0 is 0 (must be finite and "
            "positive)");
}

TEST(Fp8Test, MatMulOnTheBytesEqualsMatMulOnTheDequantisedMatrix) {
  // Partial blocks both ways, several tokens, every code but NaN.
  const size_t rows = 150, cols = 300, tokens = 3;
  std::vector<uint8_t> codes(rows * cols);
  for (size_t i = 0; i < codes.size(); ++i) {
    uint8_t c = static_cast<uint8_t>((i * 37) % 256);
    codes[i] = (c & 0x7f) == 0x7f ? 0x00 : c;
  }
  const std::vector<float> scales = {1e-3f, 2.5e-4f, 7e-4f, 3e-3f, 5e-4f, 9e-4f};
  const Fp8BlockMatrix w{codes.data(), scales.data(), rows, cols};
  ASSERT_TRUE(CheckFp8Matrix(w).ok());
  std::vector<float> x(tokens * cols);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * i) * 3.0f;
  std::vector<float> dense(rows * cols);
  ASSERT_TRUE(DequantizeFp8Rows(w, 0, rows, dense.data()).ok());
  std::vector<float> want(tokens * rows), got(tokens * rows);
  MatMul({DenseType::kF32, dense.data(), rows, cols}, x.data(), tokens,
         want.data(), nullptr);
  ThreadPool pool(2);
  for (SimdLevel level :
       {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512,
        SimdLevel::kHighway}) {
    if (SetSimdLevel(level) != level) continue;  // not on this CPU
    SCOPED_TRACE(SimdLevelName(level));
    MatMulFp8(w, x.data(), tokens, got.data(), &pool);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(got[i], want[i]) << i;  // bit for bit, not approximately
    }
  }
  SetSimdLevel(SimdLevel::kAuto);
}

}  // namespace
}  // namespace flotilla::kernels
