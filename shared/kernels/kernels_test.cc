// Kernel correctness against the reference fixture pack
// (tests/fixtures/k3/FORMAT.md sections 4.1 and 4.2) and the numeric bars of
// docs/k3-architecture.md section 5.
#include "shared/kernels/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace flotilla::kernels {
namespace {

using nlohmann::json;

json LoadJson(const std::string& relative) {
  const std::string path =
      std::string(FLOTILLA_TEST_DATA_DIR) + "/k3/fixtures/" + relative;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);
}

std::vector<float> Floats(const json& tensor) {
  return tensor.at("data").get<std::vector<float>>();
}

std::vector<uint8_t> Bytes(const json& tensor) {
  std::vector<uint8_t> out;
  for (const json& v : tensor.at("data")) out.push_back(v.get<int>());
  return out;
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// The op-fixture bar from MANIFEST.json: |got - want| <= 1e-5 + 1e-4 |want|.
void ExpectWithinFixtureTolerance(const std::vector<float>& got,
                                  const std::vector<float>& want) {
  const json manifest = LoadJson("ops/MANIFEST.json");
  const double abs_tol = manifest["tolerance"]["fp32_abs"].get<double>();
  const double rel_tol = manifest["tolerance"]["fp32_rel"].get<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LE(std::fabs(double{got[i]} - want[i]),
              abs_tol + rel_tol * std::fabs(double{want[i]}))
        << "index " << i << " got " << got[i] << " want " << want[i];
  }
}

TEST(KernelsFixtureTest, RmsNorm) {
  const json f = LoadJson("ops/rmsnorm.json");
  const std::vector<float> in = Floats(f["in"]);
  const std::vector<float> weight = Floats(f["weight"]);
  const size_t n = weight.size();
  const float eps = f["eps"].get<float>();
  std::vector<float> got(in.size());
  for (size_t r = 0; r < in.size() / n; ++r) {
    RmsNorm(in.data() + r * n, weight.data(), n, eps, got.data() + r * n);
  }
  ExpectWithinFixtureTolerance(got, Floats(f["out"]));

  // In place (x and y alias) must give the same bits.
  std::vector<float> inplace = in;
  for (size_t r = 0; r < in.size() / n; ++r) {
    RmsNorm(inplace.data() + r * n, weight.data(), n, eps,
            inplace.data() + r * n);
  }
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(Bits(inplace[i]), Bits(got[i]));
  }
}

// Infinite betas are SwiGLU: silu(g) * u, evaluated as (g * sigmoid(g)) * u
// (HF Mixtral's act_fn(w1 x) * w3 x).
TEST(KernelsTest, SituGluWithInfiniteBetasIsSwiGlu) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> g = {-30.f, -2.5f, -0.25f, 0.f, 0.75f, 3.f, 40.f};
  const std::vector<float> u = {1.5f, -2.f, 0.5f, 7.f, -0.125f, 3.f, 0.01f};
  std::vector<float> got(g.size());
  SituGlu(g.data(), u.data(), g.size(), inf, inf, got.data());
  for (size_t i = 0; i < g.size(); ++i) {
    const float silu = g[i] * (1.0f / (1.0f + std::exp(-g[i])));
    EXPECT_EQ(got[i], silu * u[i]) << i;
    EXPECT_TRUE(std::isfinite(got[i])) << i;
  }
}

// gpt-oss's activation (modeling_gpt_oss.py GptOssExperts): the gate is
// capped from above only, the up half clamped both ways and shifted by one.
TEST(KernelsTest, ClampedSwigluClampsGateAboveAndUpBothWays) {
  const std::vector<float> g = {-30.f, -2.5f, 0.f, 0.75f, 7.f, 9.f, 40.f};
  const std::vector<float> u = {1.5f, -9.f, 0.5f, 7.5f, -0.125f, 3.f, -1.f};
  std::vector<float> got(g.size());
  ClampedSwiglu(g.data(), u.data(), g.size(), 7.0f, 1.702f, got.data());
  for (size_t i = 0; i < g.size(); ++i) {
    const float gate = g[i] > 7.f ? 7.f : g[i];
    const float up = u[i] > 7.f ? 7.f : (u[i] < -7.f ? -7.f : u[i]);
    const float glu = gate * (1.0f / (1.0f + std::exp(-1.702f * gate)));
    EXPECT_EQ(got[i], (up + 1.0f) * glu) << i;
  }
  // Above the limit the gate stops growing; below -limit it is not lifted.
  EXPECT_EQ(got[5], 4.f * (7.f * (1.0f / (1.0f + std::exp(-1.702f * 7.f)))));
  EXPECT_EQ(got[6], 0.f);  // u = -1: the +1 shift zeroes it
  EXPECT_LT(got[0], 0.f);
  EXPECT_GT(got[0], -1e-10f);
}

TEST(KernelsFixtureTest, SituGlu) {
  const json f = LoadJson("ops/situ_glu.json");
  const std::vector<float> in = Floats(f["in"]);
  const size_t rows = f["in"]["shape"][0].get<size_t>();
  const size_t width = f["in"]["shape"][1].get<size_t>() / 2;
  const float beta1 = f["beta"].get<float>();
  const float beta2 = f["linear_beta"].get<float>();
  std::vector<float> got(rows * width);
  for (size_t r = 0; r < rows; ++r) {
    // Columns [0, width) are the gate, [width, 2 width) the up input.
    const float* row = in.data() + r * 2 * width;
    SituGlu(row, row + width, width, beta1, beta2, got.data() + r * width);
  }
  ExpectWithinFixtureTolerance(got, Floats(f["out"]));
  const float max_abs = f["max_abs"].get<float>();
  // Both caps saturate at |z| = 1000, where float rounds the bound to 100.
  for (float v : got) EXPECT_LE(std::fabs(v), max_abs);
}

class Mxfp4FixtureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const json f = LoadJson("mxfp4.json");
    packed_ = Bytes(f["packed"]);
    scales_ = Bytes(f["scales"]);
    expected_ = Floats(f["expected"]);
    swapped_first64_ =
        f["expected_swapped_nibbles"]["first64"].get<std::vector<float>>();
    w_.packed = packed_.data();
    w_.scales = scales_.data();
    w_.rows = f["rows"].get<size_t>();
    w_.cols = f["logical_width"].get<size_t>();
  }

  std::vector<uint8_t> packed_, scales_;
  std::vector<float> expected_, swapped_first64_;
  Mxfp4Matrix w_;
};

TEST_F(Mxfp4FixtureTest, DequantizeIsBitExact) {
  ASSERT_EQ(expected_.size(), w_.rows * w_.cols);
  std::vector<float> row(w_.cols);
  for (size_t r = 0; r < w_.rows; ++r) {
    DequantizeMxfp4Row(w_, r, row.data());
    for (size_t c = 0; c < w_.cols; ++c) {
      ASSERT_EQ(Bits(row[c]), Bits(expected_[r * w_.cols + c]))
          << "row " << r << " col " << c;
    }
  }
}

TEST_F(Mxfp4FixtureTest, SwappedNibbleOrderDiffers) {
  std::vector<float> row(w_.cols);
  DequantizeMxfp4Row(w_, 0, row.data());
  int differing = 0;
  for (size_t c = 0; c < swapped_first64_.size(); ++c) {
    if (Bits(row[c]) != Bits(swapped_first64_[c])) ++differing;
  }
  EXPECT_GT(differing, 32);
}

TEST(Mxfp4Test, KnownByte) {
  // FORMAT: packed 0x16 with scale 121 decodes to (4, 0.5) * 2^-6.
  std::vector<uint8_t> packed(16, 0), scales(1, 121);
  packed[0] = 0x16;
  const Mxfp4Matrix w{packed.data(), scales.data(), 1, 32};
  std::vector<float> row(32);
  DequantizeMxfp4Row(w, 0, row.data());
  EXPECT_EQ(row[0], 0.0625f);
  EXPECT_EQ(row[1], 0.0078125f);
}

TEST(Mxfp4Test, ExtremeScales) {
  // s = 0 is 2^-127 (subnormal as float, must not be flushed); s = 255
  // contributes nothing, even against an infinite input.
  std::vector<uint8_t> packed(32, 0x22), scales = {0, 255};  // 1.0 each
  const Mxfp4Matrix w{packed.data(), scales.data(), 1, 64};
  std::vector<float> row(64);
  DequantizeMxfp4Row(w, 0, row.data());
  EXPECT_EQ(row[0], std::ldexp(1.0f, -127));
  EXPECT_EQ(row[40], 0.0f);

  std::vector<float> x(64, 1.0f);
  x[40] = INFINITY;
  for (SimdLevel level :
       {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512,
        SimdLevel::kHighway}) {
    SetSimdLevel(level);
    float y = -1.0f;
    MatMulMxfp4(w, x.data(), 1, &y, nullptr);
    EXPECT_EQ(y, std::ldexp(32.0f, -127)) << SimdLevelName(level);
  }
  SetSimdLevel(SimdLevel::kAuto);
}

TEST_F(Mxfp4FixtureTest, FusedMatchesDequantizedMatMul) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const size_t n_tokens = 3;
  std::vector<float> x(n_tokens * w_.cols);
  for (float& v : x) v = dist(rng);

  std::vector<float> fused(n_tokens * w_.rows);
  MatMulMxfp4(w_, x.data(), n_tokens, fused.data(), nullptr);

  std::vector<float> dense(w_.rows * w_.cols);
  for (size_t r = 0; r < w_.rows; ++r) {
    DequantizeMxfp4Row(w_, r, dense.data() + r * w_.cols);
  }
  const DenseMatrix dm{DenseType::kF32, dense.data(), w_.rows, w_.cols};
  std::vector<float> ref(n_tokens * w_.rows);
  MatMul(dm, x.data(), n_tokens, ref.data(), nullptr);

  // Relative to the largest output of the token: single outputs can be
  // near zero through cancellation.
  for (size_t t = 0; t < n_tokens; ++t) {
    double max_ref = 0.0, max_diff = 0.0;
    for (size_t r = 0; r < w_.rows; ++r) {
      const size_t i = t * w_.rows + r;
      max_ref = std::max(max_ref, std::fabs(double{ref[i]}));
      max_diff = std::max(max_diff, std::fabs(double{fused[i]} - ref[i]));
    }
    EXPECT_LT(max_diff / max_ref, 1e-6) << "token " << t;
  }
}

TEST(DenseTest, Bf16MatchesSameValuesAsF32) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> bits(0, 0xffff);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const size_t rows = 37, cols = 203, n_tokens = 4;
  std::vector<uint16_t> wb(rows * cols);
  std::vector<float> wf(rows * cols);
  for (size_t i = 0; i < wb.size(); ++i) {
    // Finite, normal bf16 values with random sign and mantissa.
    const uint32_t sign = bits(rng) & 1, mantissa = bits(rng) & 0x7f;
    const uint32_t exponent = 100 + bits(rng) % 50;
    wb[i] = static_cast<uint16_t>((sign << 15) | (exponent << 7) | mantissa);
    wf[i] = Bf16ToF32(wb[i]);
  }
  std::vector<float> x(n_tokens * cols);
  for (float& v : x) v = dist(rng);
  std::vector<float> yb(n_tokens * rows), yf(n_tokens * rows);
  MatMul({DenseType::kBF16, wb.data(), rows, cols}, x.data(), n_tokens,
         yb.data(), nullptr);
  MatMul({DenseType::kF32, wf.data(), rows, cols}, x.data(), n_tokens,
         yf.data(), nullptr);
  for (size_t i = 0; i < yb.size(); ++i) ASSERT_EQ(Bits(yb[i]), Bits(yf[i]));
}

TEST(DenseTest, MatchesDirectDot16) {
  // MatMul element (t, r) is exactly DotF32(row r, x_t) rounded to float.
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const size_t rows = 9, cols = 77, n_tokens = 2;
  std::vector<float> w(rows * cols), x(n_tokens * cols), y(n_tokens * rows);
  for (float& v : w) v = dist(rng);
  for (float& v : x) v = dist(rng);
  MatMul({DenseType::kF32, w.data(), rows, cols}, x.data(), n_tokens, y.data(),
         nullptr);
  for (size_t t = 0; t < n_tokens; ++t) {
    for (size_t r = 0; r < rows; ++r) {
      const float want = static_cast<float>(
          DotF32(w.data() + r * cols, x.data() + t * cols, cols));
      EXPECT_EQ(Bits(y[t * rows + r]), Bits(want));
    }
  }
}

TEST(ElementwiseTest, SoftmaxSumsToOne) {
  std::vector<float> x = {1.0f, 2.0f, 3.0f, -1000.0f};
  Softmax(x.data(), x.size());
  double sum = 0.0;
  for (float v : x) sum += v;
  EXPECT_NEAR(sum, 1.0, 1e-6);
  EXPECT_EQ(x[3], 0.0f);
  EXPECT_GT(x[2], x[1]);
}

TEST(ElementwiseTest, SigmoidAndSilu) {
  EXPECT_EQ(Sigmoid(0.0f), 0.5f);
  EXPECT_EQ(Sigmoid(-1000.0f), 0.0f);
  EXPECT_EQ(Sigmoid(1000.0f), 1.0f);
  std::vector<float> x = {0.0f, 2.0f};
  SiluInPlace(x.data(), x.size());
  EXPECT_EQ(x[0], 0.0f);
  EXPECT_FLOAT_EQ(x[1], 2.0f / (1.0f + std::exp(-2.0f)));
}

}  // namespace
}  // namespace flotilla::kernels
