// The expert formats' one home: names round-trip, sizes are those the
// formats define, shapes a format cannot hold are refused by name, and a
// matrix multiplied through its codec equals the kernel's own result.
#include "shared/experts/expert_codec.h"

#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/kernels/kernels.h"

namespace flotilla::experts {
namespace {

using ::testing::HasSubstr;

TEST(ExpertCodecTest, NamesSizesAndShapes) {
  for (ExpertFormat f :
       {ExpertFormat::kMxfp4, ExpertFormat::kF32, ExpertFormat::kBF16}) {
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
  EXPECT_EQ(CodecOf(ExpertFormat::kMxfp4).parts, 2);
  EXPECT_STREQ(CodecOf(ExpertFormat::kMxfp4).suffixes[1], "weight_scale");

  auto unknown = CodecNamed("fp8", "manifest.json");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("manifest.json"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("\"fp8\""));
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

}  // namespace
}  // namespace flotilla::experts
