// Prefetch hints (RemoteExperts::PrefetchLayer) against real workers on
// ckpt_A: a hint sent before a layer's Compute makes the worker read the
// experts ahead (prefetch hits in the Compute stats), the results stay
// bitwise identical to the single-process LocalExperts, and hints that fail
// (dead worker) or guess wrong are counted and never fail a layer.
#include <signal.h>

#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "coordinator/model/local_experts.h"
#include "gtest/gtest.h"
#include "shared/kernels/thread_pool.h"
#include "shared/model/safetensors.h"
#include "tests/distributed_test_util.h"

namespace flotilla::dtest {
namespace {

constexpr int kLayer = 2;  // an MoE layer of ckpt_A (layer 0 is dense)
constexpr int kWidth = 64;

struct Step {
  int rows = 0;
  std::vector<float> z;
  std::vector<coordinator::ExpertTask> tasks;
  std::vector<int> experts;  // distinct, ascending
};

// `rows` rows routed top-2 over ckpt_A's 8 experts.
Step RandomStep(int rows, uint32_t seed) {
  Step s;
  s.rows = rows;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  s.z.resize(static_cast<size_t>(rows) * kWidth);
  for (float& v : s.z) v = normal(rng);
  std::vector<bool> used(8, false);
  for (int r = 0; r < rows; ++r) {
    const int a = static_cast<int>(rng() % 8);
    const int b = (a + 1 + static_cast<int>(rng() % 7)) % 8;
    s.tasks.push_back({r, a, 0.3f + 0.1f * normal(rng)});
    s.tasks.push_back({r, b, 0.7f + 0.1f * normal(rng)});
    used[a] = used[b] = true;
  }
  for (int e = 0; e < 8; ++e) {
    if (used[e]) s.experts.push_back(e);
  }
  return s;
}

std::vector<float> Local(const Step& s) {
  auto config = model::LoadK3Config(CkptA() + "/config.json");
  auto source = model::SafetensorsCheckpoint::OpenDir(CkptA());
  EXPECT_TRUE(config.ok() && source.ok());
  kernels::ThreadPool pool(1);
  auto local =
      coordinator::LocalExperts::Create(source->get(), config->Moe(), &pool);
  EXPECT_TRUE(local.ok()) << local.status();
  std::vector<float> out(s.z.size());
  EXPECT_TRUE(
      (*local)
          ->ComputeLayer(kLayer, s.z.data(), s.rows, s.tasks, out.data())
          .ok());
  return out;
}

// Waits until every hint sent so far has been answered (scheduled or
// failed), so that the test knows the worker has started the reads.
void WaitForHints(const coordinator::RemoteExperts& remote,
                  uint64_t scheduled) {
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    const coordinator::RemoteStats s = remote.remote_stats();
    if (s.prefetch_scheduled >= scheduled) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ADD_FAILURE() << "hints not answered within 10 s";
}

class PrefetchTest : public ::testing::Test {
 protected:
  void Open(int n, int r) {
    auto fleet = StartFleet(CkptA(), n, r, dir_.path());
    ASSERT_TRUE(fleet.ok()) << fleet.status();
    fleet_ = std::move(*fleet);
    coordinator::RemoteExpertsOptions options;
    options.workers = Addresses(fleet_);
    auto model = OpenRemoteModel(CkptA(), options);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    remote_ = dynamic_cast<coordinator::RemoteExperts*>(model_->experts());
    ASSERT_NE(remote_, nullptr);
  }

  std::vector<float> Compute(const Step& s) {
    std::vector<float> out(s.z.size(), -1.0f);
    const absl::Status status =
        remote_->ComputeLayer(kLayer, s.z.data(), s.rows, s.tasks, out.data());
    EXPECT_TRUE(status.ok()) << status;
    return out;
  }

  TempDir dir_;
  Fleet fleet_;
  std::unique_ptr<coordinator::K3Model> model_;
  coordinator::RemoteExperts* remote_ = nullptr;
};

TEST_F(PrefetchTest, HintedExpertsAreReadAheadAndResultsAreBitwiseEqual) {
  // Two workers holding every expert (R = 2): the hint decides nothing the
  // deal would not, and the Compute must go where the hint went.
  ASSERT_NO_FATAL_FAILURE(Open(2, 2));
  const Step step = RandomStep(6, 11);
  const std::vector<float> want = Local(step);

  // Without a hint: no prefetch hits.
  EXPECT_TRUE(Compute(step) == want);
  EXPECT_EQ(remote_->backend_stats().prefetch_hits, 0u);

  ASSERT_TRUE(remote_->PrefetchLayer(kLayer, step.experts).ok());
  WaitForHints(*remote_, step.experts.size());
  const std::vector<float> got = Compute(step);
  EXPECT_TRUE(got == want) << "max diff " << MaxAbsDiff(got, want);
  // Every expert of the step was read by the hint, on the worker that then
  // computed it.
  EXPECT_EQ(remote_->backend_stats().prefetch_hits, step.experts.size());
  const coordinator::RemoteStats s = remote_->remote_stats();
  EXPECT_GE(s.prefetch_calls, 1u);
  EXPECT_LE(s.prefetch_calls, 2u);  // one per worker at most
  EXPECT_EQ(s.prefetch_experts, step.experts.size());
  EXPECT_EQ(s.prefetch_scheduled, step.experts.size());
  EXPECT_EQ(s.prefetch_failed, 0u);
  EXPECT_EQ(s.failed_calls, 0u);

  // A wrong guess (experts the step does not use) changes nothing.
  std::vector<int> wrong;
  for (int e = 0; e < 8; ++e) {
    if (!std::binary_search(step.experts.begin(), step.experts.end(), e))
      wrong.push_back(e);
  }
  ASSERT_TRUE(remote_->PrefetchLayer(kLayer, wrong).ok());
  WaitForHints(*remote_, step.experts.size() + wrong.size());
  EXPECT_TRUE(Compute(step) == want);
  EXPECT_EQ(remote_->backend_stats().prefetch_hits, step.experts.size());

  // Out-of-range arguments are the caller's bug.
  EXPECT_EQ(remote_->PrefetchLayer(0, {1}).code(),
            absl::StatusCode::kInvalidArgument);  // dense layer
  EXPECT_EQ(remote_->PrefetchLayer(kLayer, {8}).code(),
            absl::StatusCode::kInvalidArgument);
}

// The forward pass sending hints before every MoE layer's attention
// (--expert-prefetch): logits bitwise equal to the single-process run, and
// the workers use the reads.
TEST_F(PrefetchTest, GenerationWithHintsIsBitwiseEqual) {
  ASSERT_NO_FATAL_FAILURE(Open(3, 2));
  auto want = GenerateLocal(CkptA(), kPrompt, 8);
  ASSERT_TRUE(want.ok()) << want.status();
  model_->set_expert_lookahead(true);
  auto got = GenerateWith(*model_, kPrompt, 8);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->ids, want->ids);
  EXPECT_TRUE(got->logits == want->logits)
      << "max diff " << MaxAbsDiff(got->logits, want->logits);
  const coordinator::RemoteStats s = remote_->remote_stats();
  EXPECT_GE(s.prefetch_calls, s.layers);
  EXPECT_EQ(s.prefetch_failed, 0u);
  EXPECT_GT(remote_->backend_stats().prefetch_hits, 0u);
}

TEST_F(PrefetchTest, HintToADeadWorkerIsCountedAndTheLayerStillRuns) {
  ASSERT_NO_FATAL_FAILURE(Open(2, 2));
  const Step step = RandomStep(4, 5);
  const std::vector<float> want = Local(step);
  fleet_[1]->Signal(SIGKILL);
  // All eight experts: both workers get a share of the hint.
  ASSERT_TRUE(remote_->PrefetchLayer(kLayer, {0, 1, 2, 3, 4, 5, 6, 7}).ok());
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (remote_->remote_stats().prefetch_failed == 0 &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(remote_->remote_stats().prefetch_failed, 1u);
  // The layer fails over to worker 0 and matches bit for bit.
  EXPECT_TRUE(Compute(step) == want);
  EXPECT_GE(remote_->remote_stats().failed_calls, 1u);
}

}  // namespace
}  // namespace flotilla::dtest
