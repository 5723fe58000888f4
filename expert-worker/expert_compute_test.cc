// The worker's compute core on ckpt_A: results combine to exactly what the
// single-process LocalExperts computes, and malformed calls are refused
// with InvalidArgument before any work.
#include "expert-worker/expert_compute.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/experts/expert_index.h"
#include "shared/experts/in_memory_experts.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/model/safetensors.h"
#include "shared/pack/pack_manifest.h"

namespace flotilla::expert_worker {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

const std::string kCkptA = std::string(FLOTILLA_TEST_DATA_DIR) + "/k3/ckpt_A";
constexpr int kLatent = 64;

std::unique_ptr<ExpertCompute> MakeCompute(int k, int n,
                                           const std::string& dir = kCkptA,
                                           std::string* pack_dir = nullptr) {
  PlanOptions o;
  o.model_dir = dir;
  o.shard = ShardSpec{k, n};
  o.shard_given = true;
  o.memory_budget_bytes = uint64_t{1} << 30;
  o.compute_threads = 2;
  auto plan = BuildShardPlan(o);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return nullptr;
  if (pack_dir != nullptr) *pack_dir = plan->pack_dir;
  ComputeOptions co;
  co.fetch_slots = 3;  // fewer than the experts: slots get recycled
  auto compute = ExpertCompute::Create(*plan, co);
  EXPECT_TRUE(compute.ok()) << compute.status();
  return compute.ok() ? std::move(*compute) : nullptr;
}

// Rows of random activations and a top-2 routing over 8 experts.
struct Step {
  int rows = 0;
  std::vector<float> z;
  std::vector<experts::ExpertAssignment> tasks;
};

Step RandomStep(int rows, uint32_t seed) {
  Step s;
  s.rows = rows;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  s.z.resize(static_cast<size_t>(rows) * kLatent);
  for (float& v : s.z) v = normal(rng);
  for (int r = 0; r < rows; ++r) {
    const int a = static_cast<int>(rng() % 8);
    const int b = (a + 1 + static_cast<int>(rng() % 7)) % 8;
    s.tasks.push_back({r, a, 0.25f + normal(rng) * 0.1f});
    s.tasks.push_back({r, b, 0.75f + normal(rng) * 0.1f});
  }
  return s;
}

ComputeCall CallFor(const Step& s, int layer, bool expert_outputs) {
  ComputeCall c;
  c.layer = layer;
  c.row_width = kLatent;
  c.num_rows = s.rows;
  c.activations = s.z.data();
  c.activations_size = s.z.size();
  c.assignments = s.tasks;
  c.kind = expert_outputs ? CallKind::kExpertOutputs : CallKind::kRowSums;
  return c;
}

std::vector<float> Local(const Step& s, int layer) {
  auto config = model::LoadK3Config(kCkptA + "/config.json");
  auto source = model::SafetensorsCheckpoint::OpenDir(kCkptA);
  EXPECT_TRUE(config.ok() && source.ok());
  kernels::ThreadPool pool(1);
  auto local =
      experts::InMemoryExperts::Create(source->get(), (*config).Moe(), &pool);
  EXPECT_TRUE(local.ok()) << local.status();
  std::vector<float> out(s.z.size());
  EXPECT_TRUE((*local)
                  ->ComputeLayer(layer, s.z.data(), s.rows, s.tasks.data(),
                                 s.tasks.size(), out.data())
                  .ok());
  return out;
}

void ExpectBitwiseLocal(ExpertCompute* compute) {
  for (int layer : {1, 6, 12}) {
    const Step s = RandomStep(5, 100 + layer);
    const std::vector<float> want = Local(s, layer);

    ComputeCall call = CallFor(s, layer, /*expert_outputs=*/true);
    auto shape = compute->Validate(call);
    ASSERT_TRUE(shape.ok()) << shape.status();
    std::vector<float> outputs(shape->output_floats);
    ComputeCallStats stats;
    ASSERT_TRUE(
        compute->Run(call, *shape, outputs.data(), nullptr, &stats).ok());
    EXPECT_GT(stats.bytes_read, 0u);
    EXPECT_GT(stats.experts_computed, 0u);
    // The coordinator's combine: task order, double, rounded once.
    std::vector<double> acc(s.z.size(), 0.0);
    for (size_t i = 0; i < s.tasks.size(); ++i) {
      for (int j = 0; j < kLatent; ++j) {
        acc[s.tasks[i].row * kLatent + j] +=
            static_cast<double>(s.tasks[i].weight) * outputs[i * kLatent + j];
      }
    }
    for (size_t i = 0; i < acc.size(); ++i) {
      ASSERT_EQ(static_cast<float>(acc[i]), want[i]) << layer << " " << i;
    }

    // One worker's row sums are the whole sum: also bitwise.
    call.kind = CallKind::kRowSums;
    shape = compute->Validate(call);
    ASSERT_TRUE(shape.ok());
    ASSERT_EQ(shape->rows.size(), 5u);
    std::vector<double> sums(shape->output_doubles);
    ASSERT_TRUE(compute->Run(call, *shape, nullptr, sums.data(), &stats).ok());
    for (size_t i = 0; i < sums.size(); ++i) {
      ASSERT_EQ(static_cast<float>(sums[i]), want[i]) << layer << " " << i;
    }
  }
}

TEST(ExpertComputeTest, OutputsCombineBitwiseToLocalExperts) {
  std::string pack_dir;
  auto compute = MakeCompute(0, 1, kCkptA, &pack_dir);
  ASSERT_NE(compute, nullptr);
  EXPECT_EQ(pack_dir, "");  // no pack: the headers were parsed
  ExpectBitwiseLocal(compute.get());
}

// A copy of ckpt_A in a fresh folder `dir`, packed by the real
// flotilla-tool (experts served in place, so the shard keeps them).
void PackedCopyOfCkptA(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f :
       {"config.json", "model.safetensors", "model.safetensors.index.json"}) {
    fs::copy_file(kCkptA + "/" + f, dir + "/" + f);
  }
  const std::string pack = std::string(FLOTILLA_BIN_DIR) +
                           "/flotilla-tool pack --model " + dir +
                           " >/dev/null 2>&1";
  ASSERT_EQ(std::system(pack.c_str()), 0) << pack;
}

// A model folder with a fresh pack: the worker takes the fingerprint and
// its experts' locations from the pack's expert table (no header parse)
// and computes the same bits.
TEST(ExpertComputeTest, FromAPackOfTheFolderComputesTheSameBits) {
  namespace fs = std::filesystem;
  const std::string dir = ::testing::TempDir() + "/expert_compute_pack_" +
                          std::to_string(::getpid());
  ASSERT_NO_FATAL_FAILURE(PackedCopyOfCkptA(dir));
  std::string pack_dir;
  auto compute = MakeCompute(0, 1, dir, &pack_dir);
  ASSERT_NE(compute, nullptr);
  EXPECT_EQ(pack_dir, dir + "/flotilla-pack");
  ExpectBitwiseLocal(compute.get());
  // Worker 1 of 2 indexes only its own experts; the others are refused.
  auto half = MakeCompute(1, 2, dir, &pack_dir);
  ASSERT_NE(half, nullptr);
  int served = 0;
  for (int e = 0; e < 8; ++e) {
    Step one = RandomStep(1, 7);
    one.tasks = {{0, e, 1.0f}};
    served += half->Validate(CallFor(one, 1, true)).ok();
  }
  EXPECT_EQ(served, 4);  // 8 experts over 2 workers, one replica each
  fs::remove_all(dir);
}

// With a pack, every expert the worker reads is checked against the
// expert table's checksum, as the coordinator checks its own reads: one
// flipped byte in the shard fails the call that needs that expert, naming
// layer, expert, file and offset, and only that one.
// One row through one expert of `layer`: the call's status.
absl::Status RunOneExpert(ExpertCompute* compute, int layer, int expert,
                          uint32_t seed) {
  Step one = RandomStep(1, seed);
  one.tasks = {{0, expert, 1.0f}};
  const ComputeCall call = CallFor(one, layer, /*expert_outputs=*/true);
  auto shape = compute->Validate(call);
  if (!shape.ok()) return shape.status();
  std::vector<float> outputs(shape->output_floats);
  ComputeCallStats stats;
  return compute->Run(call, *shape, outputs.data(), nullptr, &stats);
}

// Flips the middle byte of `key`'s run in `folder`'s safetensors.
void FlipByteOfExpert(const std::string& folder, experts::ExpertKey key) {
  auto ckpt = model::SafetensorsCheckpoint::OpenDir(folder);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto index = experts::ExpertIndex::FromTensorSource(**ckpt, {});
  ASSERT_TRUE(index.ok()) << index.status();
  const experts::ExpertLocation* loc = index->Find(key);
  ASSERT_NE(loc, nullptr);
  std::FILE* f = std::fopen(index->files()[loc->file].c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  const long at = static_cast<long>(loc->offset + loc->length / 2);
  ASSERT_EQ(std::fseek(f, at, SEEK_SET), 0);
  const int byte = std::fgetc(f);
  ASSERT_EQ(std::fseek(f, at, SEEK_SET), 0);
  std::fputc(byte ^ 0x10, f);
  ASSERT_EQ(std::fclose(f), 0);
}

// A `pack --workers` folder has no pack, but carries its experts'
// checksums (expert_checksums.bin): the worker verifies each read against
// them. Without the file the same flipped byte goes unnoticed, which is
// what the file is for.
TEST(ExpertComputeTest, APackWorkersFolderVerifiesItsExperts) {
  namespace fs = std::filesystem;
  const std::string dir =
      ::testing::TempDir() + "/expert_compute_pw_" + std::to_string(::getpid());
  fs::remove_all(dir);
  const std::string cut = std::string(FLOTILLA_BIN_DIR) +
                          "/flotilla-tool pack --model " + kCkptA + " --out " +
                          dir + " --workers 2 >/dev/null 2>&1";
  ASSERT_EQ(std::system(cut.c_str()), 0) << cut;
  const std::string folder = dir + "/workers/worker-0";
  ASSERT_TRUE(fs::exists(folder + "/expert_checksums.bin"));
  auto open = [&] {
    PlanOptions o;
    o.model_dir = folder;
    o.placement_file = folder + "/placement.json";
    o.memory_budget_bytes = uint64_t{1} << 30;
    o.compute_threads = 2;
    auto plan = BuildShardPlan(o);
    EXPECT_TRUE(plan.ok()) << plan.status();
    ComputeOptions co;
    co.fetch_slots = 3;
    auto compute = ExpertCompute::Create(*plan, co);
    EXPECT_TRUE(compute.ok()) << compute.status();
    return compute.ok() ? std::move(*compute) : nullptr;
  };
  // Two experts of one layer that worker 0 holds.
  auto ckpt = model::SafetensorsCheckpoint::OpenDir(folder);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto index = experts::ExpertIndex::FromTensorSource(**ckpt, {});
  ASSERT_TRUE(index.ok()) << index.status();
  const std::vector<experts::ExpertKey> keys = index->Keys();
  ASSERT_GE(keys.size(), 2u);
  ASSERT_EQ(keys[0].layer, keys[1].layer);
  ASSERT_NO_FATAL_FAILURE(FlipByteOfExpert(folder, keys[0]));
  auto run = [&](ExpertCompute* compute, int expert) {
    return RunOneExpert(compute, keys[0].layer, expert, 13);
  };
  auto compute = open();
  ASSERT_NE(compute, nullptr);
  const absl::Status bad = run(compute.get(), keys[0].expert);
  EXPECT_EQ(bad.code(), absl::StatusCode::kDataLoss) << bad;
  EXPECT_THAT(bad.message(),
              AllOf(HasSubstr(absl::StrCat("layer ", keys[0].layer, " expert ",
                                           keys[0].expert)),
                    HasSubstr("experts.safetensors at offset"),
                    HasSubstr("checksum mismatch")));
  EXPECT_TRUE(run(compute.get(), keys[1].expert).ok());
  fs::remove(folder + "/expert_checksums.bin");
  auto unchecked = open();
  ASSERT_NE(unchecked, nullptr);
  EXPECT_TRUE(run(unchecked.get(), keys[0].expert).ok());
  fs::remove_all(dir);
}

// A table that does not describe the folder's experts is refused at open.
TEST(ExpertComputeTest, AChecksumTableOfAnotherCutIsRefused) {
  namespace fs = std::filesystem;
  const std::string dir = ::testing::TempDir() + "/expert_compute_pw2_" +
                          std::to_string(::getpid());
  fs::remove_all(dir);
  const std::string cut = std::string(FLOTILLA_BIN_DIR) +
                          "/flotilla-tool pack --model " + kCkptA + " --out " +
                          dir + " --workers 2 >/dev/null 2>&1";
  ASSERT_EQ(std::system(cut.c_str()), 0) << cut;
  const std::string w0 = dir + "/workers/worker-0";
  const std::string w1 = dir + "/workers/worker-1";
  fs::copy_file(w1 + "/expert_checksums.bin", w0 + "/expert_checksums.bin",
                fs::copy_options::overwrite_existing);
  PlanOptions o;
  o.model_dir = w0;
  o.placement_file = w0 + "/placement.json";
  o.memory_budget_bytes = uint64_t{1} << 30;
  auto plan = BuildShardPlan(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto compute = ExpertCompute::Create(*plan, ComputeOptions());
  EXPECT_EQ(compute.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(compute.status().message(),
              AllOf(HasSubstr("expert_checksums.bin"),
                    HasSubstr("re-run flotilla-tool pack --workers")));
  fs::remove_all(dir);
}

TEST(ExpertComputeTest, AFlippedByteInAnExpertFailsItsCall) {
  namespace fs = std::filesystem;
  const std::string dir = ::testing::TempDir() + "/expert_compute_flip_" +
                          std::to_string(::getpid());
  ASSERT_NO_FATAL_FAILURE(PackedCopyOfCkptA(dir));
  auto m = pack::LoadPackManifest(dir + "/flotilla-pack");
  ASSERT_TRUE(m.ok()) << m.status();
  uint64_t offset = 0;
  for (const pack::PackExpert& e : m->experts) {
    if (e.layer == 6 && e.expert == 3) offset = e.offset + e.length / 2;
  }
  ASSERT_GT(offset, 0u);
  {  // Data bytes only: the shard's header, hence the pack, stays fresh.
    std::FILE* f = std::fopen((dir + "/model.safetensors").c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fseek(f, static_cast<long>(offset), SEEK_SET), 0);
    const int byte = std::fgetc(f);
    ASSERT_EQ(std::fseek(f, static_cast<long>(offset), SEEK_SET), 0);
    std::fputc(byte ^ 0x10, f);
    ASSERT_EQ(std::fclose(f), 0);
  }
  std::string pack_dir;
  auto compute = MakeCompute(0, 1, dir, &pack_dir);
  ASSERT_NE(compute, nullptr);
  ASSERT_EQ(pack_dir, dir + "/flotilla-pack");
  auto run = [&](int expert) {
    return RunOneExpert(compute.get(), 6, expert, 11);
  };
  const absl::Status bad = run(3);
  EXPECT_EQ(bad.code(), absl::StatusCode::kDataLoss) << bad;
  EXPECT_THAT(bad.message(), HasSubstr("layer 6 expert 3"));
  EXPECT_THAT(bad.message(), HasSubstr("model.safetensors at offset"));
  EXPECT_THAT(bad.message(), HasSubstr("checksum mismatch"));
  EXPECT_TRUE(run(2).ok());  // its neighbours are intact
  fs::remove_all(dir);
}

TEST(ExpertComputeTest, MalformedCallsAreInvalidArgument) {
  auto compute = MakeCompute(0, 2);  // owns (e + layer) mod 2 == 0
  ASSERT_NE(compute, nullptr);
  const Step s = RandomStep(2, 7);
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    const char* says;
    std::function<void(ComputeCall*)> edit;
  };
  const std::vector<Case> cases = {
      {"dense layer", [](ComputeCall* c) { c->layer = 0; }},
      {"does not exist", [](ComputeCall* c) { c->layer = 13; }},
      {"does not exist", [](ComputeCall* c) { c->layer = -1; }},
      {"latent width", [](ComputeCall* c) { c->row_width = 63; }},
      {"num_rows", [](ComputeCall* c) { c->num_rows = 0; }},
      {"num_rows", [](ComputeCall* c) { c->num_rows = 1 << 30; }},
      {"activations hold", [](ComputeCall* c) { c->activations_size -= 1; }},
      {"activations hold", [](ComputeCall* c) { c->num_rows = 3; }},
      {"assignments", [](ComputeCall* c) { c->assignments.clear(); }},
      {"not owned",
       [](ComputeCall* c) {
         c->assignments = {{0, 1, 1.f}};
       }},  // (1+2)%2=1
      {"does not exist",
       [](ComputeCall* c) {
         c->assignments = {{0, 8, 1.f}};
       }},
      {"does not exist",
       [](ComputeCall* c) {
         c->assignments = {{0, -3, 1.f}};
       }},
      {"not below num_rows",
       [](ComputeCall* c) {
         c->assignments = {{2, 0, 1.f}};
       }},
      {"not finite",
       [inf](ComputeCall* c) {
         c->assignments = {{0, 0, inf}};
       }},
      {"more than once",
       [](ComputeCall* c) {
         c->assignments = {{0, 0, 1.f}, {0, 0, 1.f}};
       }},
      {"assignments",
       [](ComputeCall* c) {
         c->assignments.assign(kMaxAssignmentsPerCall + 1, {0, 0, 1.f});
       }},
  };
  for (const Case& c : cases) {
    ComputeCall call = CallFor(s, 2, true);
    call.assignments = {{0, 0, 0.5f}, {1, 2, 0.5f}};
    c.edit(&call);
    auto shape = compute->Validate(call);
    ASSERT_FALSE(shape.ok()) << c.says;
    EXPECT_EQ(shape.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(shape.status().message()), HasSubstr(c.says));
  }
  // And a well-formed call still works afterwards.
  ComputeCall call = CallFor(s, 2, true);
  call.assignments = {{0, 0, 0.5f}, {1, 2, 0.5f}};
  auto shape = compute->Validate(call);
  ASSERT_TRUE(shape.ok()) << shape.status();
  std::vector<float> outputs(shape->output_floats);
  ComputeCallStats stats;
  EXPECT_TRUE(compute->Run(call, *shape, outputs.data(), nullptr, &stats).ok());
}

}  // namespace
}  // namespace flotilla::expert_worker
