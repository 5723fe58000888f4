// The expert formats' one home: names round-trip, sizes are those the
// formats define, shapes a format cannot hold are refused by name, and a
// matrix multiplied through its codec equals the kernel's own result.
#include "shared/experts/expert_codec.h"

#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/kernels/fp8.h"
#include "shared/kernels/kernels.h"

namespace flotilla::experts {
namespace {

using ::testing::HasSubstr;

TEST(ExpertCodecTest, NamesSizesAndShapes) {
  for (ExpertFormat f : {ExpertFormat::kMxfp4, ExpertFormat::kF32,
                         ExpertFormat::kBF16, ExpertFormat::kFp8}) {
    const ExpertCodec& c = CodecOf(f);
    auto named = CodecNamed(c.name, "m");
    ASSERT_TRUE(named.ok()) << named.status();
    EXPECT_EQ(*named, &c);
    EXPECT_EQ(c.format, f);
  }
  // [64][96]: MXFP4 is 64*96/2 packed + 64*96/32 scales bytes.
  EXPECT_EQ(CodecOf(ExpertFormat::kMxfp4).MatrixBytes(64, 96),
            64u * 96 / 2 + 64u * 96 / 32);
  EXPECT_EQ(CodecOf(ExpertFormat::kF32).MatrixBytes(64, 96), 64u * 96 * 4);
  EXPECT_EQ(CodecOf(ExpertFormat::kBF16).MatrixBytes(64, 96), 64u * 96 * 2);
  // FP8: the codes, and a float per 128x128 block ([1][1] here).
  EXPECT_EQ(CodecOf(ExpertFormat::kFp8).MatrixBytes(64, 96), 64u * 96 + 4);
  EXPECT_EQ(CodecOf(ExpertFormat::kFp8).MatrixBytes(2048, 7168),
            2048u * 7168 + 16 * 56 * 4);
  EXPECT_STREQ(CodecOf(ExpertFormat::kFp8).suffixes[1], "weight_scale_inv");
  EXPECT_EQ(CodecOf(ExpertFormat::kMxfp4).parts, 2);
  EXPECT_STREQ(CodecOf(ExpertFormat::kMxfp4).suffixes[1], "weight_scale");

  auto unknown = CodecNamed("fp4", "manifest.json");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("manifest.json"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("\"fp4\""));
  EXPECT_THAT(unknown.status().message(), HasSubstr("mxfp4"));

  EXPECT_FALSE(CodecOf(ExpertFormat::kMxfp4).check_shape(64, 48).ok());
  EXPECT_TRUE(CodecOf(ExpertFormat::kMxfp4).check_shape(64, 64).ok());
  EXPECT_TRUE(CodecOf(ExpertFormat::kF32).check_shape(3, 5).ok());
}

TEST(ExpertCodecTest, DenseMatMulEqualsTheKernelEvenMisaligned) {
  const size_t rows = 5, cols = 7;
  // One spare byte in front: the codec must copy to an aligned buffer.
  std::vector<uint8_t> bytes(1 + rows * cols * 4);
  std::vector<float> w(rows * cols), x(2 * cols), y(2 * rows), want(2 * rows);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.25f * (i % 9) - 1.0f;
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.5f - 0.125f * (i % 5);
  std::memcpy(bytes.data() + 1, w.data(), w.size() * 4);
  kernels::MatMul({kernels::DenseType::kF32, w.data(), rows, cols}, x.data(), 2,
                  want.data(), nullptr);
  const uint8_t* part[1] = {bytes.data() + 1};
  std::vector<float> scratch;
  CodecOf(ExpertFormat::kF32)
      .matmul(part, MatrixShape{rows, cols}, x.data(), 2, y.data(), nullptr,
              &scratch);
  EXPECT_EQ(y, want);
  EXPECT_FALSE(scratch.empty());
}

// An FP8 run through its codec: the matmul equals the kernel on the codes
// (scales copied aside when they sit off a float boundary), and the value
// check names a NaN code's matrix and position.
TEST(ExpertCodecTest, Fp8RunsMultiplyAndAreChecked) {
  const ExpertCodec& c = CodecOf(ExpertFormat::kFp8);
  const MatrixShape shape{130, 64};  // two block rows, one block column
  std::vector<uint8_t> run(1 + c.MatrixBytes(130, 64));
  uint8_t* codes = run.data() + 1;
  for (size_t i = 0; i < 130 * 64; ++i)
    codes[i] = static_cast<uint8_t>(i % 0x70);
  const float scales[2] = {2e-3f, 5e-4f};
  uint8_t* scale_bytes = codes + 130 * 64 + 0;  // offset 8321: misaligned
  std::memcpy(scale_bytes, scales, sizeof(scales));
  const uint8_t* parts[2] = {codes, scale_bytes};
  std::vector<float> x(64, 0.5f), got(130), want(130), scratch;
  c.matmul(parts, shape, x.data(), 1, got.data(), nullptr, &scratch);
  kernels::MatMulFp8({codes, scales, 130, 64}, x.data(), 1, want.data(),
                     nullptr);
  EXPECT_EQ(got, want);
  // Three matrices at offsets 0, parts[1] - codes; a NaN in the third.
  ASSERT_NE(c.check_values, nullptr);
  const uint64_t off = static_cast<uint64_t>(scale_bytes - codes);
  const uint64_t offsets[6] = {0, off, 0, off, 0, off};
  EXPECT_TRUE(CheckRunValues(c, codes, offsets, {shape, shape, shape}).ok());
  codes[64 * 129 + 3] = 0xff;
  const absl::Status bad =
      CheckRunValues(c, codes, offsets, {shape, shape, shape});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.message(), HasSubstr("gate (w1) matrix"));
  EXPECT_THAT(bad.message(), HasSubstr("row 129, column 3 is NaN"));
  EXPECT_EQ(CodecOf(ExpertFormat::kBF16).check_values, nullptr);
}

}  // namespace
}  // namespace flotilla::experts
