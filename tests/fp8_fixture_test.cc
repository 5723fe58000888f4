// The FP8 tensors of the DeepSeek-V3 fixture (tests/fixtures/deepseek-v3,
// README §3.2) read through the safetensors reader and the e4m3 decoder:
// every weight has its [ceil(out/128), ceil(in/128)] scale, every block's
// largest code is ±448 (the block's amax maps to 448 when quantised, so a
// wrong decode or block index shows), and the code counts the README
// gives (17 negative zeros, 377 subnormals, 448 of 476 blocks partial) hold.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "shared/kernels/fp8.h"
#include "shared/model/safetensors.h"

namespace flotilla {
namespace {

TEST(Fp8FixtureTest, DeepSeekV3BlocksDecodeAsReleased) {
  auto source = model::SafetensorsCheckpoint::OpenDir(
      std::string(FLOTILLA_TEST_DATA_DIR) + "/deepseek-v3/ckpt_A");
  ASSERT_TRUE(source.ok()) << source.status();
  int weights = 0, blocks = 0, partial = 0, negative_zero = 0, subnormal = 0;
  for (const std::string& name : (*source)->Names()) {
    const model::TensorInfo* w = (*source)->Find(name);
    if (w->dtype != model::DType::kF8E4M3) continue;
    ++weights;
    SCOPED_TRACE(name);
    const model::TensorInfo* s = (*source)->Find(name + "_scale_inv");
    ASSERT_NE(s, nullptr);
    ASSERT_EQ(w->shape.size(), 2u);
    const size_t rows = w->shape[0], cols = w->shape[1];
    kernels::Fp8BlockMatrix m;
    m.rows = rows;
    m.cols = cols;
    ASSERT_EQ(s->dtype, model::DType::kF32);
    ASSERT_EQ(s->shape, (std::vector<int64_t>{static_cast<int64_t>(m.scale_rows()),
                                              static_cast<int64_t>(m.scale_cols())}));
    std::vector<uint8_t> codes(w->nbytes);
    std::vector<float> scales(s->nbytes / 4);
    ASSERT_TRUE((*source)->ReadRaw(*w, codes.data()).ok());
    ASSERT_TRUE((*source)->ReadRaw(*s, scales.data()).ok());
    m.codes = codes.data();
    m.scale_inv = scales.data();
    std::vector<float> values(rows * cols);
    ASSERT_TRUE(kernels::DequantizeFp8Rows(m, 0, rows, values.data()).ok());
    for (uint8_t c : codes) {
      negative_zero += c == 0x80;
      subnormal += (c & 0x78) == 0 && (c & 0x07) != 0;
    }
    for (size_t br = 0; br < m.scale_rows(); ++br) {
      for (size_t bc = 0; bc < m.scale_cols(); ++bc) {
        ++blocks;
        const size_t r_end = std::min(rows, (br + 1) * 128);
        const size_t c_end = std::min(cols, (bc + 1) * 128);
        partial += r_end - br * 128 < 128 || c_end - bc * 128 < 128;
        float amax = 0;
        for (size_t r = br * 128; r < r_end; ++r) {
          for (size_t c = bc * 128; c < c_end; ++c) {
            amax = std::max(amax, std::fabs(values[r * cols + c]));
          }
        }
        // The block's largest weight is 448 times its scale, exactly.
        EXPECT_EQ(amax, 448.0f * scales[br * m.scale_cols() + bc])
            << "block " << br << "," << bc;
      }
    }
  }
  EXPECT_EQ(weights, 232);
  EXPECT_EQ(blocks, 476);
  EXPECT_EQ(partial, 448);
  EXPECT_EQ(negative_zero, 17);
  EXPECT_EQ(subnormal, 377);
}

}  // namespace
}  // namespace flotilla
