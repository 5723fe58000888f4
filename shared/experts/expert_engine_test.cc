#include "shared/experts/expert_engine.h"

#include <cstring>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/model/safetensors.h"
#include "shared/testing/experts_test_util.h"

namespace flotilla::experts {
namespace {

using testing::K3Path;

struct Case {
  std::vector<float> z;
  std::vector<ExpertAssignment> tasks;
  int rows = 0;
};

// `rows` tokens, each routed to `topk` distinct experts with random
// weights; some experts get many rows, some none.
Case RandomCase(int rows, int topk, int num_experts, size_t latent,
                uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> uni(0.f, 1.f);
  Case c;
  c.rows = rows;
  c.z.resize(rows * latent);
  for (float& v : c.z) v = normal(rng);
  for (int r = 0; r < rows; ++r) {
    std::vector<int> experts(num_experts);
    for (int e = 0; e < num_experts; ++e) experts[e] = e;
    std::shuffle(experts.begin(), experts.end(), rng);
    for (int j = 0; j < topk; ++j) {
      c.tasks.push_back(ExpertAssignment{r, experts[j], uni(rng)});
    }
  }
  std::shuffle(c.tasks.begin(), c.tasks.end(), rng);
  return c;
}

absl::StatusOr<std::unique_ptr<ExpertEngine>> CkptAEngine(
    const ExpertEngineOptions& options, kernels::ThreadPool* pool) {
  const model::K3Config c =
      testing::LoadConfigOrDie(K3Path("ckpt_A/config.json"));
  auto source = model::SafetensorsCheckpoint::OpenDir(K3Path("ckpt_A"));
  if (!source.ok()) return source.status();
  ExpertIndexOptions io;
  const model::MoeSpec moe_c = c.Moe();
  io.config = &moe_c;
  auto index = ExpertIndex::FromTensorSource(**source, io);
  if (!index.ok()) return index.status();
  return ExpertEngine::Create(std::move(index).value(), moe_c.Activation(),
                              pool, options);
}

// Reference: each task on its own (one row), the run read with plain
// stream I/O, combined in task order in double.
std::vector<float> Reference(ExpertEngine& engine, int layer, const Case& c) {
  const ExpertIndex& index = engine.index();
  const model::K3Config cfg =
      testing::LoadConfigOrDie(K3Path("ckpt_A/config.json"));
  auto exec = ExpertExecutor::Create(index, cfg.Moe().Activation(), nullptr);
  EXPECT_TRUE(exec.ok());
  const size_t lat = engine.latent();
  std::vector<double> acc(c.rows * lat, 0.0);
  std::vector<float> y(lat);
  for (const ExpertAssignment& t : c.tasks) {
    const ExpertLocation* loc = index.Find(ExpertKey{layer, t.expert});
    const std::vector<uint8_t> run =
        testing::ReadBytes(index.files()[loc->file], loc->offset, loc->length);
    (*exec)->Compute(*loc, run.data(), c.z.data() + t.row * lat, 1, y.data());
    for (size_t j = 0; j < lat; ++j) {
      acc[t.row * lat + j] += static_cast<double>(t.weight) * y[j];
    }
  }
  return std::vector<float>(acc.begin(), acc.end());
}

TEST(ExpertEngineTest, BitwiseIdenticalAcrossSlotsCacheAndLookahead) {
  kernels::ThreadPool pool(2);
  const Case c = RandomCase(/*rows=*/7, /*topk=*/3, /*num_experts=*/8, 64, 1);
  const int configs[][3] = {
      {1, 0, 0}, {3, 0, 1}, {16, 0, 0}, {2, 5, 1}, {2, 16, 1}};
  std::vector<float> want;
  for (const auto& [slots, cache, lookahead] : configs) {
    ExpertEngineOptions o;
    o.fetcher.slots = slots;
    o.fetcher.cache_slots = cache;
    auto engine = CkptAEngine(o, slots == 3 ? nullptr : &pool);
    ASSERT_TRUE(engine.ok()) << engine.status();
    if (want.empty()) want = Reference(**engine, 4, c);
    std::vector<ExpertKey> next = {{5, 0}, {5, 7}, {4, 2}};
    for (int layer : {4, 5, 4}) {
      std::vector<float> out(c.rows * 64, -1.f);
      ASSERT_TRUE((*engine)
                      ->ComputeLayer(layer, c.z.data(), c.rows, c.tasks.data(),
                                     c.tasks.size(), out.data(),
                                     lookahead ? &next : nullptr)
                      .ok());
      if (layer == 4) {
        EXPECT_EQ(std::memcmp(out.data(), want.data(), out.size() * 4), 0)
            << "slots " << slots << " cache " << cache;
      }
    }
    if (cache >= 16) {  // both layers fit: the second layer-4 step hits
      EXPECT_GT((*engine)->stats().cache_hits, 0u);
    }
    if (lookahead) {
      EXPECT_GT((*engine)->stats().prefetch_issued, 0u);
    }
  }
}

TEST(ExpertEngineTest, RejectsBadTasks) {
  auto engine = CkptAEngine({}, nullptr);
  ASSERT_TRUE(engine.ok());
  std::vector<float> z(2 * 64), out(2 * 64);
  std::vector<ExpertAssignment> tasks = {{0, 1, 1.f}, {2, 1, 1.f}};
  absl::Status s = (*engine)->ComputeLayer(3, z.data(), 2, tasks.data(),
                                           tasks.size(), out.data());
  EXPECT_THAT(s.message(), ::testing::HasSubstr("expert task 1 (row 2"));
  tasks = {{0, 8, 1.f}};
  EXPECT_FALSE((*engine)
                   ->ComputeLayer(3, z.data(), 2, tasks.data(), 1, out.data())
                   .ok());
  s = (*engine)->ComputeLayer(0, z.data(), 2, tasks.data(), 0, out.data());
  EXPECT_THAT(s.message(), ::testing::HasSubstr("no routed experts"));
  // No tasks: zeros.
  out.assign(out.size(), 5.f);
  ASSERT_TRUE((*engine)
                  ->ComputeLayer(3, z.data(), 2, tasks.data(), 0, out.data())
                  .ok());
  EXPECT_EQ(out, std::vector<float>(out.size(), 0.f));
}

// The scratch bound callers charge to a memory budget holds what a call
// really grows, and TrimScratch gives a big call's scratch back.
TEST(ExpertEngineTest, ScratchStaysWithinItsBoundAndTrims) {
  auto engine = CkptAEngine({}, nullptr);
  ASSERT_TRUE(engine.ok());
  const uint64_t before = (*engine)->scratch_bytes();
  for (int rows : {1, 7, 300}) {
    const Case c = RandomCase(rows, 2, 8, 64, rows);
    std::vector<float> out(c.z.size());
    ASSERT_TRUE((*engine)
                    ->ComputeLayer(3, c.z.data(), rows, c.tasks.data(),
                                   c.tasks.size(), out.data())
                    .ok());
    const uint64_t grown = (*engine)->scratch_bytes() - before;
    EXPECT_LE(grown, (*engine)->ScratchBytesFor(rows, c.tasks.size()))
        << rows << " rows";
    EXPECT_GT(grown, 0u);
    (*engine)->TrimScratch(uint64_t{1} << 30);  // under the limit: kept
    EXPECT_EQ((*engine)->scratch_bytes() - before, grown);
  }
  (*engine)->TrimScratch(4096);  // 300 rows x 2 tasks: well above
  EXPECT_LE((*engine)->scratch_bytes(), before + 4096);
}

}  // namespace
}  // namespace flotilla::experts
