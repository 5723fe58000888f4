#include "shared/experts/expert_executor.h"

#include <cstring>
#include <random>

#include "gtest/gtest.h"
#include "shared/model/safetensors.h"
#include "shared/testing/experts_test_util.h"

namespace flotilla::experts {
namespace {

using testing::K3Path;

constexpr char kPrefix[] = "language_model.model.layers.4.block_sparse_moe.";

// ckpt_A (MXFP4, I = L = 64) and its index.
struct CkptA {
  model::K3Config config =
      testing::LoadConfigOrDie(K3Path("ckpt_A/config.json"));
  ExpertIndex index;
};

CkptA LoadCkptA() {
  CkptA a;
  auto source = model::SafetensorsCheckpoint::OpenDir(K3Path("ckpt_A"));
  EXPECT_TRUE(source.ok()) << source.status();
  ExpertIndexOptions io;
  const model::MoeSpec moe_a_config = a.config.Moe();
  io.config = &moe_a_config;
  auto index = ExpertIndex::FromTensorSource(**source, io);
  EXPECT_TRUE(index.ok()) << index.status();
  a.index = std::move(index).value();
  return a;
}

// Slice k of n of one whole MXFP4 run, laid out as `pack --split` lays it
// out (w1, w2, w3; packed then scales; rows [k*size/n, (k+1)*size/n)), and
// an index over a fake file describing it.
struct SliceRun {
  std::vector<uint8_t> bytes;
  ExpertIndex index;
  ExpertLocation loc;
};

SliceRun CutSlice(const ExpertIndex& whole, const ExpertLocation& loc,
                  const std::vector<uint8_t>& run, int k, int n) {
  SliceRun s;
  testing::FakeSource source;
  const char* names[3] = {"w1", "w2", "w3"};
  for (int w = 0; w < 3; ++w) {
    const MatrixShape& shape = whole.shape(w);
    const uint64_t begin = k * shape.rows / n, end = (k + 1) * shape.rows / n;
    for (int part = 0; part < 2; ++part) {
      const uint64_t row_bytes = part == 0 ? shape.cols / 2 : shape.cols / 32;
      const uint8_t* from =
          run.data() + loc.tensor_offsets[2 * w + part] + begin * row_bytes;
      source.Add(
          absl::StrCat(kPrefix, "experts.0.", names[w],
                       part == 0 ? ".weight_packed" : ".weight_scale"),
          model::DType::kU8,
          {static_cast<int64_t>(end - begin), static_cast<int64_t>(row_bytes)},
          "slice.bin", s.bytes.size());
      s.bytes.insert(s.bytes.end(), from, from + (end - begin) * row_bytes);
    }
  }
  auto index = ExpertIndex::FromTensorSource(source, ExpertIndexOptions());
  EXPECT_TRUE(index.ok()) << index.status();
  s.index = std::move(index).value();
  s.loc = *s.index.Find(ExpertKey{4, 0});
  return s;
}

// Row slices, computed separately and assembled in row order, give the
// whole expert's output bit for bit, for slice counts that divide the
// widths and ones that do not.
TEST(ExpertExecutorTest, RowSlicesAssembleToTheWholeExpertBitwise) {
  const CkptA a = LoadCkptA();
  kernels::ThreadPool pool(2);
  auto whole =
      ExpertExecutor::Create(a.index, a.config.Moe().Activation(), &pool);
  ASSERT_TRUE(whole.ok()) << whole.status();
  const size_t lat = 64, inter = 64, rows = 5;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(rows * lat);
  for (float& v : x) v = normal(rng);

  for (int expert : {0, 3, 7}) {
    const ExpertLocation& loc = *a.index.Find(ExpertKey{4, expert});
    const std::vector<uint8_t> run =
        testing::ReadBytes(a.index.files()[loc.file], loc.offset, loc.length);
    std::vector<float> want(rows * lat);
    (*whole)->Compute(loc, run.data(), x.data(), rows, want.data());

    for (int n : {1, 2, 3, 5}) {
      std::vector<SliceRun> slices;
      std::vector<std::unique_ptr<ExpertExecutor>> execs;
      std::vector<float> act(rows * inter, -1.f);
      for (int k = 0; k < n; ++k) {
        slices.push_back(CutSlice(a.index, loc, run, k, n));
        auto e = ExpertExecutor::CreateSliced(slices[k].index, inter,
                                              a.config.Moe().Activation(),
                                              k % 2 ? &pool : nullptr);
        ASSERT_TRUE(e.ok()) << e.status();
        EXPECT_EQ((*e)->sliced(), n > 1);
        const size_t a0 = k * inter / n, width = (*e)->intermediate();
        ASSERT_EQ(width, (k + 1) * inter / n - a0);
        std::vector<float> part(rows * width);
        (*e)->GateUp(slices[k].loc, slices[k].bytes.data(), x.data(), rows,
                     part.data());
        for (size_t r = 0; r < rows; ++r) {
          std::memcpy(&act[r * inter + a0], &part[r * width],
                      width * sizeof(float));
        }
        execs.push_back(std::move(e).value());
      }
      std::vector<float> got(rows * lat, -1.f);
      for (int k = 0; k < n; ++k) {
        const size_t c0 = k * lat / n, width = execs[k]->down_rows();
        std::vector<float> part(rows * width);
        execs[k]->Down(slices[k].loc, slices[k].bytes.data(), act.data(), rows,
                       part.data());
        for (size_t r = 0; r < rows; ++r) {
          std::memcpy(&got[r * lat + c0], &part[r * width],
                      width * sizeof(float));
        }
      }
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
          << "expert " << expert << ", " << n << " slices";
    }
  }
}

TEST(ExpertExecutorTest, RefusesShapesThatAreNotAnExpertOrASlice) {
  const CkptA a = LoadCkptA();
  const ExpertLocation& loc = *a.index.Find(ExpertKey{4, 0});
  const std::vector<uint8_t> run =
      testing::ReadBytes(a.index.files()[loc.file], loc.offset, loc.length);
  const SliceRun half = CutSlice(a.index, loc, run, 1, 2);
  const model::GluActivation act = a.config.Moe().Activation();
  // A slice is not a whole expert.
  auto s = ExpertExecutor::Create(half.index, act, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("do not form an expert"),
            std::string::npos)
      << s.status();
  // W2's columns must be the whole intermediate size.
  s = ExpertExecutor::CreateSliced(half.index, 32, act, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("row slice of an expert of "
                                      "intermediate size 32"),
            std::string::npos)
      << s.status();
  // A whole expert is also its own one slice.
  s = ExpertExecutor::CreateSliced(a.index, 64, act, nullptr);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE((*s)->sliced());
}

}  // namespace
}  // namespace flotilla::experts
