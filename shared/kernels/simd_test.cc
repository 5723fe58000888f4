// Every SIMD level the CPU supports, and every thread count, must give the
// same bits as the scalar reference: the reduction order is part of the
// contract (kernels.h), not an implementation detail.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "hwy/targets.h"
#include "shared/kernels/kernels.h"

namespace flotilla::kernels {
namespace {

// A SIMD path under test: a level, and for Highway one of its targets
// (every target compiled in that this CPU runs: NEON and SVE on ARM; SSE4,
// AVX2, AVX-512 and EMU128 on x86), forced through Highway's test hook.
struct Variant {
  SimdLevel level;
  int64_t hwy_target = 0;
};

void Use(const Variant& v) {
  hwy::SetSupportedTargetsForTest(v.hwy_target);
  SetSimdLevel(v.level);
}

std::string Name(const Variant& v) {
  std::string name = SimdLevelName(v.level);
  if (v.hwy_target != 0)
    name += std::string(":") + hwy::TargetName(v.hwy_target);
  return name;
}

std::vector<Variant> SupportedSimdLevels() {
  std::vector<Variant> levels;
  for (SimdLevel level : {SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (SetSimdLevel(level) == level) levels.push_back({level});
  }
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    levels.push_back({SimdLevel::kHighway, target});
  }
  SetSimdLevel(SimdLevel::kAuto);
  return levels;
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

uint64_t Bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}

void ExpectSameBits(const std::vector<float>& a, const std::vector<float>& b,
                    const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(Bits(a[i]), Bits(b[i]))
        << what << " index " << i << ": " << a[i] << " vs " << b[i];
  }
}

class SimdTest : public ::testing::Test {
 protected:
  void TearDown() override {
    hwy::SetSupportedTargetsForTest(0);
    SetSimdLevel(SimdLevel::kAuto);
  }

  // Values spread over many binades so that the order of double additions
  // matters: a wrong lane or tree order changes the rounded result.
  float RandomFloat() {
    const float mantissa = normal_(rng_);
    return std::ldexp(mantissa, exponent_(rng_));
  }
  std::vector<float> RandomFloats(size_t n) {
    std::vector<float> v(n);
    for (float& f : v) f = RandomFloat();
    return v;
  }
  size_t Uniform(size_t lo, size_t hi) {
    return std::uniform_int_distribution<size_t>(lo, hi)(rng_);
  }

  // Float rounding of the final result hides most double-level order
  // differences, so random data alone would let a wrong lane or tree order
  // pass. Planting pairs of huge values that cancel exactly (same weight,
  // opposite x) makes the result depend on which small terms were absorbed
  // before the cancellation, i.e. on the exact order of additions.
  std::vector<std::pair<size_t, size_t>> PlantCancellingPairs(
      std::vector<float>* x, size_t n_tokens, size_t cols) {
    std::vector<std::pair<size_t, size_t>> pairs;
    if (cols < 2) return pairs;
    for (int p = 0; p < 3; ++p) {
      const size_t i = Uniform(0, cols - 1), j = Uniform(0, cols - 1);
      if (i == j) continue;
      pairs.emplace_back(i, j);
      for (size_t t = 0; t < n_tokens; ++t) {
        const float big = std::ldexp(1.0f + normal_(rng_) * 0.1f, 75);
        (*x)[t * cols + i] = big;
        (*x)[t * cols + j] = -big;
      }
    }
    return pairs;
  }

  std::mt19937 rng_{12345};
  std::normal_distribution<float> normal_{0.0f, 1.0f};
  std::uniform_int_distribution<int> exponent_{-20, 20};
};

TEST_F(SimdTest, DotF32MatchesScalar) {
  const std::vector<Variant> levels = SupportedSimdLevels();
  for (int iter = 0; iter < 200; ++iter) {
    const size_t n = Uniform(0, 300);
    const std::vector<float> a = RandomFloats(n);
    std::vector<float> b = RandomFloats(n);
    PlantCancellingPairs(&b, 1, n);
    SetSimdLevel(SimdLevel::kScalar);
    const double want = DotF32(a.data(), b.data(), n);
    for (const Variant& level : levels) {
      Use(level);
      ASSERT_EQ(Bits(DotF32(a.data(), b.data(), n)), Bits(want))
          << Name(level) << " n=" << n;
    }
  }
}

// Attention's two loops over cached rows: one query against strided keys
// (each result DotF32's bits), and the weighted sum of strided values (one
// running double per column, rows in order).
// Attention's float orders written out literally (kernels.h): a score is
// 32 lanes by column mod 32, one fma each, the tree i += i+16, +8, +4, +2,
// lane 0 + lane 1; a weighted sum one fma per row, in row order.
float DocumentedScore(const float* a, const float* row, size_t n) {
  float lane[32] = {};
  for (size_t c = 0; c < n; ++c)
    lane[c % 32] = std::fma(a[c], row[c], lane[c % 32]);
  for (int width = 16; width >= 2; width /= 2) {
    for (int i = 0; i < width; ++i) lane[i] += lane[i + width];
  }
  return lane[0] + lane[1];
}

TEST_F(SimdTest, StridedRowDotsAndWeightedSumsMatchScalar) {
  const std::vector<Variant> levels = SupportedSimdLevels();
  for (int iter = 0; iter < 100; ++iter) {
    const size_t n = Uniform(1, 200), count = Uniform(0, 40);
    const size_t stride = n + Uniform(0, 70);
    const std::vector<float> a = RandomFloats(n), w = RandomFloats(count);
    std::vector<float> rows = RandomFloats(count * stride + n);
    PlantCancellingPairs(&rows, 1, rows.size());
    const std::vector<float> acc0(n, 0.25f);
    SetSimdLevel(SimdLevel::kScalar);
    std::vector<float> dots(count), acc = acc0;
    DotF32Rows(a.data(), rows.data(), stride, count, n, dots.data());
    AddWeightedRows(w.data(), rows.data(), stride, count, n, acc.data());
    for (size_t j = 0; j < count; ++j) {
      ASSERT_EQ(Bits(dots[j]),
                Bits(DocumentedScore(a.data(), rows.data() + j * stride, n)))
          << "row " << j;
    }
    for (size_t i = 0; i < n; ++i) {
      float want = 0.25f;
      for (size_t j = 0; j < count; ++j) {
        want = std::fma(w[j], rows[j * stride + i], want);
      }
      ASSERT_EQ(Bits(acc[i]), Bits(want)) << "col " << i;
    }
    for (const Variant& level : levels) {
      Use(level);
      std::vector<float> got_dots(count), got_acc = acc0;
      DotF32Rows(a.data(), rows.data(), stride, count, n, got_dots.data());
      AddWeightedRows(w.data(), rows.data(), stride, count, n, got_acc.data());
      for (size_t j = 0; j < count; ++j) {
        ASSERT_EQ(Bits(got_dots[j]), Bits(dots[j]))
            << Name(level) << " n=" << n << " row " << j;
      }
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(Bits(got_acc[i]), Bits(acc[i]))
            << Name(level) << " n=" << n << " count=" << count << " col " << i;
      }
    }
  }
}

TEST_F(SimdTest, ScoreLanesPastTheColumnsReceiveNothing) {
  // Every product underflows to -0.0, so each lane that took a column holds
  // -0.0 and the score is -0.0; a level that padded its tail with zero
  // products would turn lanes 8-31 (one column each, in the tail step of
  // 40 columns) into +0.0 and answer +0.0.
  const size_t n = 40;
  const std::vector<float> a(n, -1e-30f), row(n, 1e-30f);
  std::vector<Variant> all = SupportedSimdLevels();
  all.push_back({SimdLevel::kScalar});
  for (const Variant& level : all) {
    Use(level);
    float score = 1.0f, many = 1.0f;
    DotF32Rows(a.data(), row.data(), n, 1, n, &score);
    DotF32RowsMany(a.data(), n, 1, row.data(), n, 1, n, &many, 1);
    EXPECT_EQ(Bits(score), Bits(-0.0f)) << Name(level);
    EXPECT_EQ(Bits(many), Bits(-0.0f)) << Name(level);
  }
}

// A block of queries against a block of rows gives each query's
// DotF32Rows and AddWeightedRows bits at every level: odd widths, strides
// and counts, so every tile edge and column tail runs.
TEST_F(SimdTest, QueryBlocksMatchOneQueryAtATime) {
  std::vector<Variant> levels = SupportedSimdLevels();
  levels.push_back({SimdLevel::kScalar});
  for (int iter = 0; iter < 60; ++iter) {
    const size_t n = Uniform(1, 200), queries = Uniform(1, 11);
    const size_t count = Uniform(0, 70);
    const size_t stride = n + Uniform(0, 40), q_stride = n + Uniform(0, 9);
    const size_t out_stride = count + Uniform(0, 5);
    const size_t w_stride = count + Uniform(0, 5), acc_stride = n + 3;
    const std::vector<float> a = RandomFloats(queries * q_stride);
    const std::vector<float> w = RandomFloats(queries * w_stride);
    std::vector<float> rows = RandomFloats(count * stride + n);
    PlantCancellingPairs(&rows, 1, rows.size());
    const std::vector<float> acc0(queries * acc_stride, 0.25f);
    SetSimdLevel(SimdLevel::kScalar);
    std::vector<float> want_dots(queries * out_stride, -1.0f);
    std::vector<float> want_acc = acc0;
    for (size_t i = 0; i < queries; ++i) {
      DotF32Rows(a.data() + i * q_stride, rows.data(), stride, count, n,
                 want_dots.data() + i * out_stride);
      AddWeightedRows(w.data() + i * w_stride, rows.data(), stride, count, n,
                      want_acc.data() + i * acc_stride);
    }
    for (const Variant& level : levels) {
      Use(level);
      std::vector<float> dots(queries * out_stride, -1.0f), acc = acc0;
      DotF32RowsMany(a.data(), q_stride, queries, rows.data(), stride, count, n,
                     dots.data(), out_stride);
      AddWeightedRowsMany(w.data(), w_stride, queries, rows.data(), stride,
                          count, n, acc.data(), acc_stride);
      for (size_t i = 0; i < dots.size(); ++i) {
        ASSERT_EQ(Bits(dots[i]), Bits(want_dots[i]))
            << Name(level) << " n=" << n << " queries=" << queries
            << " rows=" << count << " at " << i;
      }
      for (size_t i = 0; i < acc.size(); ++i) {
        ASSERT_EQ(Bits(acc[i]), Bits(want_acc[i]))
            << Name(level) << " n=" << n << " queries=" << queries
            << " rows=" << count << " at " << i;
      }
    }
  }
}

TEST_F(SimdTest, RmsNormMatchesScalar) {
  const std::vector<Variant> levels = SupportedSimdLevels();
  for (int iter = 0; iter < 50; ++iter) {
    const size_t n = Uniform(1, 500);
    const std::vector<float> x = RandomFloats(n), w = RandomFloats(n);
    std::vector<float> want(n), got(n);
    SetSimdLevel(SimdLevel::kScalar);
    RmsNorm(x.data(), w.data(), n, 1e-5f, want.data());
    for (const Variant& level : levels) {
      Use(level);
      RmsNorm(x.data(), w.data(), n, 1e-5f, got.data());
      ExpectSameBits(got, want, Name(level));
    }
  }
}

TEST_F(SimdTest, DenseMatMulMatchesScalarAndThreadCounts) {
  const std::vector<Variant> levels = SupportedSimdLevels();
  ThreadPool pool2(2), pool3(3);
  for (int iter = 0; iter < 60; ++iter) {
    const size_t rows = Uniform(1, 100);
    size_t cols = Uniform(1, 400);
    if (cols % 16 == 0) ++cols;  // Always exercise the tail.
    const size_t n_tokens =
        Uniform(1, 13);  // 8- and 4-token tiles and the rest
    const bool bf16 = iter % 2 == 1;
    std::vector<float> wf = RandomFloats(rows * cols);
    std::vector<float> x = RandomFloats(n_tokens * cols);
    for (auto [i, j] : PlantCancellingPairs(&x, n_tokens, cols)) {
      for (size_t r = 0; r < rows; ++r) wf[r * cols + j] = wf[r * cols + i];
    }
    std::vector<uint16_t> wb(rows * cols);
    for (size_t i = 0; i < wb.size(); ++i) {
      uint32_t u;
      std::memcpy(&u, &wf[i], sizeof u);
      wb[i] = static_cast<uint16_t>(u >> 16);
    }
    const DenseMatrix w =
        bf16 ? DenseMatrix{DenseType::kBF16, wb.data(), rows, cols}
             : DenseMatrix{DenseType::kF32, wf.data(), rows, cols};
    std::vector<float> want(n_tokens * rows), got(n_tokens * rows);
    SetSimdLevel(SimdLevel::kScalar);
    MatMul(w, x.data(), n_tokens, want.data(), nullptr);
    std::vector<Variant> all = levels;
    all.push_back({SimdLevel::kScalar});
    for (const Variant& level : all) {
      Use(level);
      for (ThreadPool* pool :
           {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
        std::fill(got.begin(), got.end(), NAN);
        MatMul(w, x.data(), n_tokens, got.data(), pool);
        ExpectSameBits(got, want, Name(level));
      }
    }
  }
}

TEST_F(SimdTest, Mxfp4MatMulMatchesScalarAndThreadCounts) {
  const std::vector<Variant> levels = SupportedSimdLevels();
  ThreadPool pool2(2), pool3(3);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int iter = 0; iter < 60; ++iter) {
    const size_t rows = Uniform(1, 100);
    const size_t cols = 32 * Uniform(1, 12);
    const size_t n_tokens = Uniform(1, 5);
    std::vector<uint8_t> packed(rows * cols / 2), scales(rows * cols / 32);
    for (uint8_t& b : packed) b = static_cast<uint8_t>(byte(rng_));
    for (uint8_t& s : scales) {
      // Mostly realistic exponents, plus the extremes 0 and 255.
      const int pick = byte(rng_);
      s = static_cast<uint8_t>(pick < 8    ? 0
                               : pick < 16 ? 255
                                           : 100 + pick % 50);
    }
    std::vector<float> x = RandomFloats(n_tokens * cols);
    for (auto [i, j] : PlantCancellingPairs(&x, n_tokens, cols)) {
      // Same E2M1 value and same scale at both columns in every row.
      for (size_t r = 0; r < rows; ++r) {
        uint8_t* row = packed.data() + r * cols / 2;
        const int ni = (i % 2 == 0) ? row[i / 2] & 15 : row[i / 2] >> 4;
        uint8_t& bj = row[j / 2];
        bj = (j % 2 == 0) ? static_cast<uint8_t>((bj & 0xf0) | ni)
                          : static_cast<uint8_t>((bj & 0x0f) | (ni << 4));
        scales[r * cols / 32 + j / 32] = scales[r * cols / 32 + i / 32];
      }
    }
    const Mxfp4Matrix w{packed.data(), scales.data(), rows, cols};
    std::vector<float> want(n_tokens * rows), got(n_tokens * rows);
    SetSimdLevel(SimdLevel::kScalar);
    MatMulMxfp4(w, x.data(), n_tokens, want.data(), nullptr);
    std::vector<Variant> all = levels;
    all.push_back({SimdLevel::kScalar});
    for (const Variant& level : all) {
      Use(level);
      for (ThreadPool* pool :
           {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
        std::fill(got.begin(), got.end(), NAN);
        MatMulMxfp4(w, x.data(), n_tokens, got.data(), pool);
        ExpectSameBits(got, want, Name(level));
      }
    }
  }
}

TEST_F(SimdTest, LargeMatricesSplitAcrossThreads) {
  // Big enough that the pool really splits the rows (small ones run inline).
  const size_t rows = 1000, cols = 1056, n_tokens = 3;
  const std::vector<float> wf = RandomFloats(rows * cols);
  const std::vector<float> x = RandomFloats(n_tokens * cols);
  std::vector<uint8_t> packed(rows * cols / 2), scales(rows * cols / 32);
  for (size_t i = 0; i < packed.size(); ++i) packed[i] = Uniform(0, 255);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = Uniform(118, 124);
  const DenseMatrix dw{DenseType::kF32, wf.data(), rows, cols};
  const Mxfp4Matrix mw{packed.data(), scales.data(), rows, cols};
  std::vector<float> want_d(n_tokens * rows), want_m(n_tokens * rows);
  std::vector<float> got(n_tokens * rows);
  SetSimdLevel(SimdLevel::kScalar);
  MatMul(dw, x.data(), n_tokens, want_d.data(), nullptr);
  MatMulMxfp4(mw, x.data(), n_tokens, want_m.data(), nullptr);
  ThreadPool pool(2);
  std::vector<Variant> all = SupportedSimdLevels();
  all.push_back({SimdLevel::kScalar});
  for (const Variant& level : all) {
    Use(level);
    MatMul(dw, x.data(), n_tokens, got.data(), &pool);
    ExpectSameBits(got, want_d, Name(level));
    MatMulMxfp4(mw, x.data(), n_tokens, got.data(), &pool);
    ExpectSameBits(got, want_m, Name(level));
  }
}

TEST_F(SimdTest, LongBatchesSplitIntoPasses) {
  // More tokens than one pass over the weights (kTokensPerPass = 32).
  const size_t rows = 21, cols = 200, n_tokens = 70;
  std::vector<uint16_t> wb(rows * cols);
  for (size_t i = 0; i < wb.size(); ++i) {
    wb[i] = static_cast<uint16_t>(0x3c00 + Uniform(0, 0x7ff));
  }
  std::vector<uint8_t> packed(rows * 224 / 2), scales(rows * 224 / 32);
  for (uint8_t& b : packed) b = static_cast<uint8_t>(Uniform(0, 255));
  for (uint8_t& s : scales) s = static_cast<uint8_t>(Uniform(118, 124));
  const DenseMatrix dw{DenseType::kBF16, wb.data(), rows, cols};
  const Mxfp4Matrix mw{packed.data(), scales.data(), rows, 224};
  const std::vector<float> x = RandomFloats(n_tokens * 224);
  ThreadPool pool(2);
  std::vector<Variant> all = SupportedSimdLevels();
  all.push_back({SimdLevel::kScalar});
  for (const Variant& level : all) {
    Use(level);
    std::vector<float> batch(n_tokens * rows), one(rows);
    MatMul(dw, x.data(), n_tokens, batch.data(), &pool);
    for (size_t t = 0; t < n_tokens; ++t) {
      MatMul(dw, x.data() + t * cols, 1, one.data(), nullptr);
      for (size_t r = 0; r < rows; ++r) {
        ASSERT_EQ(Bits(batch[t * rows + r]), Bits(one[r])) << t << " " << r;
      }
    }
    MatMulMxfp4(mw, x.data(), n_tokens, batch.data(), &pool);
    for (size_t t = 0; t < n_tokens; ++t) {
      MatMulMxfp4(mw, x.data() + t * 224, 1, one.data(), nullptr);
      for (size_t r = 0; r < rows; ++r) {
        ASSERT_EQ(Bits(batch[t * rows + r]), Bits(one[r])) << t << " " << r;
      }
    }
  }
}

TEST(SimdLevelTest, EveryPathOfThisCpuIsUnderTest) {
  std::string names;
  for (const Variant& v : SupportedSimdLevels()) names += Name(v) + " ";
  std::printf("SIMD paths checked against scalar: %s\n", names.c_str());
#if defined(__aarch64__)
  // Every ARMv8 CPU has NEON: the Highway NEON kernels must be among them.
  EXPECT_NE(names.find("highway:NEON "), std::string::npos) << names;
  EXPECT_EQ(SetSimdLevel(SimdLevel::kAuto), SimdLevel::kHighway);
#elif defined(__x86_64__)
  EXPECT_NE(names.find("highway:"), std::string::npos) << names;
#endif
  SetSimdLevel(SimdLevel::kAuto);
}

TEST(SimdLevelTest, AutoPicksBestAndNamesAreStable) {
  const SimdLevel best = SetSimdLevel(SimdLevel::kAuto);
  EXPECT_NE(best, SimdLevel::kAuto);
  EXPECT_EQ(ActiveSimdLevel(), best);
  EXPECT_EQ(SetSimdLevel(SimdLevel::kScalar), SimdLevel::kScalar);
  EXPECT_STREQ(SimdLevelName(ActiveSimdLevel()), "scalar");
  SetSimdLevel(SimdLevel::kAuto);
}

}  // namespace
}  // namespace flotilla::kernels
