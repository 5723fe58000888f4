// RemoteExperts' own logic against a fake fleet (fake_fleet.h): how a
// layer's experts are dealt and sent (one call per worker), how failures
// are retried on replicas or reported, how answers are checked, and that
// the combine is the single-process rule. The wire and real workers are
// tests/distributed_*_test.cc's.
#include "coordinator/remote/remote_experts.h"

#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/remote/fake_fleet.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/testing/fake_clock.h"

namespace flotilla::coordinator {
namespace {

using ::testing::AllOf;
using testing::FakeFleet;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ToyExpert;
using testing::WorkerBehaviour;

constexpr char kFingerprint[] = "0123456789abcdef";
constexpr int kLayer = 1;

class RemoteExpertsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = model::LoadK3Config(std::string(FLOTILLA_TEST_DATA_DIR) +
                                 "/k3/ckpt_A/config.json");
    ASSERT_TRUE(c.ok()) << c.status();
    config_ = *c;  // 13 layers (0 dense), 8 experts, width 64
    width_ = config_.routed_expert_hidden_size;
  }

  // n workers; expert e of layer l is held by r of them, from (e + l) mod n
  // on (the rotate-v1 rule).
  std::vector<std::set<std::pair<int, int>>> Rotate(int n, int r) const {
    std::vector<std::set<std::pair<int, int>>> owned(n);
    for (int l = 1; l < config_.num_hidden_layers; ++l) {
      for (int e = 0; e < config_.num_experts; ++e) {
        for (int k = 0; k < r; ++k) owned[(e + l + k) % n].insert({l, e});
      }
    }
    return owned;
  }

  // Connects over `fleet` (kept as fleet_ for the checks).
  absl::StatusOr<std::unique_ptr<RemoteExperts>> Connect(
      std::unique_ptr<FakeFleet> fleet, RemoteExpertsOptions options = {}) {
    fleet_ = fleet.get();
    options.workers.clear();
    for (size_t w = 0; w < workers_; ++w) {
      options.workers.push_back("fake-" + std::to_string(w) + ":1");
    }
    options.expected_fingerprint = kFingerprint;
    return RemoteExperts::ConnectWith(config_.Moe(), options, std::move(fleet));
  }

  std::unique_ptr<FakeFleet> Fleet(int n, int r) {
    workers_ = n;
    return std::make_unique<FakeFleet>(config_.Moe(), kFingerprint,
                                       Rotate(n, r));
  }

  // `rows` rows of activations and top-2 tasks per row.
  void MakeStep(int rows, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    rows_ = rows;
    z_.resize(static_cast<size_t>(rows) * width_);
    for (float& v : z_) v = dist(rng);
    tasks_.clear();
    for (int row = 0; row < rows; ++row) {
      const int a = static_cast<int>(rng() % config_.num_experts);
      const int b = (a + 1 + static_cast<int>(rng() % 7)) % config_.num_experts;
      tasks_.push_back({row, a, dist(rng)});
      tasks_.push_back({row, b, dist(rng)});
    }
  }

  // The single-process rule: per row, weight * E(z) summed in task order in
  // double, rounded once.
  std::vector<float> Reference() const {
    std::vector<double> acc(z_.size(), 0.0);
    for (const ExpertTask& t : tasks_) {
      for (size_t j = 0; j < width_; ++j) {
        acc[t.row * width_ + j] +=
            static_cast<double>(t.weight) *
            ToyExpert(kLayer, t.expert, z_[t.row * width_ + j]);
      }
    }
    return std::vector<float>(acc.begin(), acc.end());
  }

  std::vector<float> Compute(RemoteExperts& remote, absl::Status* status) {
    std::vector<float> out(z_.size(), -1.0f);
    *status = remote.ComputeLayer(kLayer, z_.data(), rows_, tasks_, out.data());
    return out;
  }

  model::K3Config config_;
  size_t width_ = 0;
  size_t workers_ = 0;
  FakeFleet* fleet_ = nullptr;
  int rows_ = 0;
  std::vector<float> z_;
  std::vector<ExpertTask> tasks_;
};

TEST_F(RemoteExpertsTest, OneCallPerWorkerAndTheTaskOrderCombine) {
  auto remote = Connect(Fleet(3, 1));
  ASSERT_TRUE(remote.ok()) << remote.status();
  MakeStep(5, 1);
  absl::Status s;
  const std::vector<float> got = Compute(**remote, &s);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(got == Reference()) << "not bitwise the single-process rule";
  std::set<int> holders;
  for (const ExpertTask& t : tasks_) holders.insert((t.expert + kLayer) % 3);
  for (int w = 0; w < 3; ++w) {
    SCOPED_TRACE(w);
    EXPECT_EQ(fleet_->calls(w), holders.count(w) ? 1 : 0);
    if (fleet_->calls(w) == 0) continue;
    // A call carries only the rows its tasks need, and only owned experts.
    const v1::ComputeRequest& q = fleet_->requests(w)[0];
    std::set<int> rows;
    for (const ExpertTask& t : tasks_) {
      if ((t.expert + kLayer) % 3 == w) rows.insert(t.row);
    }
    EXPECT_EQ(q.num_rows(), rows.size());
    EXPECT_EQ(static_cast<size_t>(q.activations_size()), rows.size() * width_);
    EXPECT_EQ(q.output(), v1::OUTPUT_KIND_EXPERT_OUTPUTS);
  }
  const RemoteStats st = (*remote)->remote_stats();
  EXPECT_EQ(st.layers, 1u);
  EXPECT_EQ(st.calls, holders.size());
  EXPECT_EQ(st.failed_calls, 0u);
}

TEST_F(RemoteExpertsTest, RowSumsAddTheWorkersPartials) {
  RemoteExpertsOptions o;
  o.row_sums = true;
  auto remote = Connect(Fleet(2, 1), o);
  ASSERT_TRUE(remote.ok()) << remote.status();
  MakeStep(4, 2);
  absl::Status s;
  const std::vector<float> got = Compute(**remote, &s);
  ASSERT_TRUE(s.ok()) << s;
  const std::vector<float> want = Reference();
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-6 * (1 + std::abs(want[i]))) << i;
  }
  EXPECT_EQ(fleet_->requests(0)[0].output(), v1::OUTPUT_KIND_ROW_SUMS);
}

TEST_F(RemoteExpertsTest, AFailedWorkersExpertsGoToTheirReplicas) {
  RemoteExpertsOptions o;
  o.retry_backoff_ms = 60000;
  auto remote = Connect(Fleet(3, 2), o);
  ASSERT_TRUE(remote.ok()) << remote.status();
  fleet_->SetBehaviour(1, WorkerBehaviour::kDown);
  MakeStep(6, 3);
  absl::Status s;
  const std::vector<float> got = Compute(**remote, &s);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(got == Reference());
  RemoteStats st = (*remote)->remote_stats();
  EXPECT_EQ(st.failed_calls, 1u);
  EXPECT_GE(st.retried_calls, 1u);
  EXPECT_THAT((*remote)->Describe(), HasSubstr("down: UNAVAILABLE"));
  // Per worker (for /metrics): worker 1's one failed call and failover.
  ASSERT_EQ(st.workers.size(), 3u);
  EXPECT_EQ(st.workers[1].compute.count(), 1u);
  EXPECT_EQ(st.workers[1].compute_failed, 1u);
  EXPECT_EQ(st.workers[1].failovers, 1u);
  EXPECT_FALSE(st.workers[1].up);
  uint64_t answered = 0;
  for (const WorkerRpcStats& w : st.workers) {
    answered += w.compute.count();
    if (&w != &st.workers[1]) {
      EXPECT_TRUE(w.up);
      EXPECT_EQ(w.failovers, 0u);
      EXPECT_EQ(w.compute_failed, 0u);
    }
  }
  EXPECT_EQ(answered, st.calls);
  // The next layer does not try the down worker again (backoff).
  const int before = fleet_->calls(1);
  MakeStep(6, 4);
  ASSERT_TRUE(Compute(**remote, &s) == Reference());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(fleet_->calls(1), before);
  EXPECT_EQ((*remote)->remote_stats().failed_calls, 1u);
}

TEST_F(RemoteExpertsTest, AMalformedAnswerIsAFailureAndIsRetried) {
  auto remote = Connect(Fleet(2, 2));
  ASSERT_TRUE(remote.ok()) << remote.status();
  fleet_->SetBehaviour(0, WorkerBehaviour::kShortAnswer);
  MakeStep(4, 5);
  absl::Status s;
  const std::vector<float> got = Compute(**remote, &s);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(got == Reference());
  EXPECT_EQ((*remote)->remote_stats().failed_calls, 1u);
  EXPECT_THAT((*remote)->Describe(), HasSubstr("output floats"));
}

TEST_F(RemoteExpertsTest, NoLiveHolderIsUnavailableNamingLayerExpertsWorker) {
  auto remote = Connect(Fleet(2, 1));
  ASSERT_TRUE(remote.ok()) << remote.status();
  fleet_->SetBehaviour(0, WorkerBehaviour::kDown);
  MakeStep(4, 6);
  absl::Status s;
  Compute(**remote, &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("layer 1"), HasSubstr("expert"),
                    HasSubstr("fake-0:1"), HasSubstr("Connection refused")));
}

TEST_F(RemoteExpertsTest, ARejectedCallFailsTheLayerWithoutRetry) {
  auto remote = Connect(Fleet(2, 2));
  ASSERT_TRUE(remote.ok()) << remote.status();
  fleet_->SetBehaviour(1, WorkerBehaviour::kReject);
  MakeStep(4, 7);
  absl::Status s;
  Compute(**remote, &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()), HasSubstr("rejected the call"));
  EXPECT_EQ((*remote)->remote_stats().retried_calls, 0u);
}

TEST_F(RemoteExpertsTest, StepsPastTheMessageLimitAreSplitByRows) {
  RemoteExpertsOptions o;
  o.max_call_bytes = 4096;  // a few rows of 64 floats per call
  auto remote = Connect(Fleet(2, 1), o);
  ASSERT_TRUE(remote.ok()) << remote.status();
  MakeStep(40, 8);
  absl::Status s;
  const std::vector<float> got = Compute(**remote, &s);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(got == Reference());
  EXPECT_GT(fleet_->calls(0) + fleet_->calls(1), 2);
  for (int w = 0; w < 2; ++w) {
    for (const v1::ComputeRequest& q : fleet_->requests(w)) {
      EXPECT_LE(static_cast<uint64_t>(q.activations_size()) * 4, 4096u);
    }
  }
}

TEST_F(RemoteExpertsTest, HintsGoWhereTheLayersCallWillGo) {
  auto remote = Connect(Fleet(2, 2));
  ASSERT_TRUE(remote.ok()) << remote.status();
  ASSERT_TRUE((*remote)->PrefetchLayer(kLayer, {2, 5}).ok());
  std::set<int> hinted_to;
  std::map<int, int> expert_to;
  for (int w = 0; w < 2; ++w) {
    for (const v1::PrefetchRequest& h : fleet_->hints(w)) {
      EXPECT_EQ(h.layer(), static_cast<uint32_t>(kLayer));
      for (uint32_t e : h.experts()) expert_to[e] = w;
      hinted_to.insert(w);
    }
  }
  EXPECT_EQ(expert_to.size(), 2u);
  EXPECT_EQ(hinted_to.size(), 2u) << "two experts, two workers: one each";
  // The layer's call for those experts goes to the hinted holders.
  rows_ = 1;
  z_.assign(width_, 0.5f);
  tasks_ = {{0, 2, 0.75f}, {0, 5, 0.25f}};
  absl::Status s;
  ASSERT_TRUE(Compute(**remote, &s) == Reference());
  ASSERT_TRUE(s.ok()) << s;
  for (int w = 0; w < 2; ++w) {
    ASSERT_EQ(fleet_->calls(w), 1) << w;
    const v1::ComputeRequest& q = fleet_->requests(w)[0];
    ASSERT_EQ(q.assignments_size(), 1);
    EXPECT_EQ(expert_to[q.assignments(0).expert()], w);
  }
  EXPECT_EQ((*remote)->remote_stats().prefetch_scheduled, 2u);
}

// Membership: a worker down before the coordinator starts is left out when
// the others hold every expert, and joins once it answers.
TEST_F(RemoteExpertsTest, StartsWithoutADownWorkerWhoseExpertsHaveReplicas) {
  auto fleet = Fleet(3, 2);
  fleet->SetBehaviour(1, WorkerBehaviour::kDown);
  RemoteExpertsOptions o;
  o.retry_backoff_ms = 1;
  auto remote = Connect(std::move(fleet), o);
  ASSERT_TRUE(remote.ok()) << remote.status();
  EXPECT_THAT((*remote)->Describe(),
              HasSubstr("(fake-1:1): shard 0/0, replicas 0, 0 experts, down"));
  MakeStep(6, 21);
  absl::Status s;
  EXPECT_EQ(Compute(**remote, &s), Reference());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(fleet_->calls(1), 0);
  EXPECT_GT(fleet_->calls(0) + fleet_->calls(2), 0);

  // Still down: probed and left out again, the step still completes.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(Compute(**remote, &s), Reference());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(fleet_->calls(1), 0);

  // Back: the next step's probe takes it in and it gets calls.
  fleet_->SetBehaviour(1, WorkerBehaviour::kAnswer);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  for (uint32_t seed = 30; seed < 36; ++seed) {
    MakeStep(6, seed);
    EXPECT_EQ(Compute(**remote, &s), Reference());
    ASSERT_TRUE(s.ok()) << s;
  }
  EXPECT_GT(fleet_->calls(1), 0);
  EXPECT_THAT((*remote)->Describe(), Not(HasSubstr("down")));
}

// What /readyz reports: the ranges with no live worker, cleared when the
// worker is back.
TEST_F(RemoteExpertsTest, MissingExpertsFollowTheDownWorkers) {
  RemoteExpertsOptions o;
  o.retry_backoff_ms = 1;
  auto remote = Connect(Fleet(2, 1), o);
  ASSERT_TRUE(remote.ok()) << remote.status();
  EXPECT_EQ((*remote)->MissingExperts(), "");
  fleet_->SetBehaviour(0, WorkerBehaviour::kDown);
  MakeStep(4, 60);
  absl::Status s;
  Compute(**remote, &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT((*remote)->MissingExperts(),
              AllOf(HasSubstr("48 (layer, expert) pairs have no live worker"),
                    HasSubstr("layer 1 experts 1,3,5,7")));
  fleet_->SetBehaviour(0, WorkerBehaviour::kAnswer);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(Compute(**remote, &s), Reference());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ((*remote)->MissingExperts(), "");
}

// While no layer runs (serve between requests), CheckWorkers probes the
// up workers too: one that stops answering is marked down and its experts
// named, and it is taken back when it answers, all without a layer call.
TEST_F(RemoteExpertsTest, IdleHealthChecksFollowTheFleet) {
  testutil::FakeClock clock;
  RemoteExpertsOptions o;
  o.retry_backoff_ms = 1;
  o.clock = &clock;
  auto remote = Connect(Fleet(2, 1), o);
  ASSERT_TRUE(remote.ok()) << remote.status();
  (*remote)->CheckWorkers();
  EXPECT_EQ((*remote)->MissingExperts(), "");
  EXPECT_EQ((*remote)->remote_stats().workers[0].failovers, 0u);
  fleet_->SetBehaviour(0, WorkerBehaviour::kDown);
  (*remote)->CheckWorkers();
  EXPECT_THAT((*remote)->MissingExperts(),
              AllOf(HasSubstr("48 (layer, expert) pairs have no live worker"),
                    HasSubstr("layer 1 experts 1,3,5,7")));
  const RemoteStats down = (*remote)->remote_stats();
  EXPECT_EQ(down.workers[0].failovers, 1u);
  EXPECT_FALSE(down.workers[0].up);
  EXPECT_TRUE(down.workers[1].up);
  EXPECT_EQ(fleet_->calls(0) + fleet_->calls(1), 0);  // no Compute sent
  fleet_->SetBehaviour(0, WorkerBehaviour::kAnswer);
  clock.Advance(std::chrono::milliseconds(5));  // past the backoff
  (*remote)->CheckWorkers();
  EXPECT_EQ((*remote)->MissingExperts(), "");
  EXPECT_TRUE((*remote)->remote_stats().workers[0].up);
  MakeStep(4, 60);
  absl::Status s;
  EXPECT_EQ(Compute(**remote, &s), Reference());
  ASSERT_TRUE(s.ok()) << s;
}

// A down worker is left alone for exactly its backoff: probed neither by
// the idle checks nor by the layers before it has passed, and probed (and
// taken back) as soon as it has, on the clock the options give.
TEST_F(RemoteExpertsTest, ADownWorkerIsProbedOnlyOnceItsBackoffHasPassed) {
  testutil::FakeClock clock;
  RemoteExpertsOptions o;
  o.retry_backoff_ms = 1000;
  o.clock = &clock;
  auto remote = Connect(Fleet(2, 2), o);
  ASSERT_TRUE(remote.ok()) << remote.status();
  fleet_->SetBehaviour(1, WorkerBehaviour::kDown);
  MakeStep(4, 7);
  absl::Status s;
  ASSERT_EQ(Compute(**remote, &s), Reference());  // worker 0 takes over
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_FALSE((*remote)->remote_stats().workers[1].up);
  fleet_->SetBehaviour(1, WorkerBehaviour::kAnswer);
  const uint64_t probes = (*remote)->remote_stats().workers[1].info.count();
  const int calls = fleet_->calls(1);
  clock.Advance(std::chrono::milliseconds(999));
  (*remote)->CheckWorkers();
  MakeStep(4, 8);
  ASSERT_EQ(Compute(**remote, &s), Reference());
  EXPECT_EQ((*remote)->remote_stats().workers[1].info.count(), probes);
  EXPECT_EQ(fleet_->calls(1), calls);
  EXPECT_FALSE((*remote)->remote_stats().workers[1].up);
  clock.Advance(std::chrono::milliseconds(1));
  (*remote)->CheckWorkers();
  EXPECT_EQ((*remote)->remote_stats().workers[1].info.count(), probes + 1);
  EXPECT_TRUE((*remote)->remote_stats().workers[1].up);
  MakeStep(4, 9);
  ASSERT_EQ(Compute(**remote, &s), Reference());
  EXPECT_GT(fleet_->calls(1), calls);
}

// The health thread does the same on its own (health_interval_ms).
TEST_F(RemoteExpertsTest, TheHealthThreadNoticesADownWorkerWhileIdle) {
  RemoteExpertsOptions o;
  o.retry_backoff_ms = 1;
  o.health_interval_ms = 5;
  auto remote = Connect(Fleet(2, 1), o);
  ASSERT_TRUE(remote.ok()) << remote.status();
  fleet_->SetBehaviour(0, WorkerBehaviour::kDown);
  std::string missing;
  for (int i = 0; i < 400 && missing.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    missing = (*remote)->MissingExperts();
  }
  EXPECT_THAT(missing, HasSubstr("48 (layer, expert) pairs"));
}

// A worker whose own checksum check fails answers DATA_LOSS: with a
// replica the layer completes from it, and the worker's error is kept.
TEST_F(RemoteExpertsTest, ADataLossAnswerIsCompletedByAReplica) {
  auto remote = Connect(Fleet(3, 2));
  ASSERT_TRUE(remote.ok()) << remote.status();
  fleet_->SetBehaviour(0, WorkerBehaviour::kCorrupt);
  MakeStep(8, 50);
  absl::Status s;
  EXPECT_EQ(Compute(**remote, &s), Reference());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_GE((*remote)->remote_stats().failed_calls, 1u);
  EXPECT_GE((*remote)->remote_stats().workers[0].compute_failed, 1u);
  EXPECT_THAT((*remote)->Describe(),
              AllOf(HasSubstr("fake-0:1"), HasSubstr("DATA_LOSS"),
                    HasSubstr("checksum mismatch")));
}

TEST_F(RemoteExpertsTest, AnAbsentWorkerWithAForeignFingerprintStaysOut) {
  auto fleet = Fleet(3, 2);
  fleet->SetBehaviour(2, WorkerBehaviour::kDown);
  fleet->SetFingerprint(2, "fedcba9876543210");
  RemoteExpertsOptions o;
  o.retry_backoff_ms = 1;
  auto remote = Connect(std::move(fleet), o);
  ASSERT_TRUE(remote.ok()) << remote.status();
  fleet_->SetBehaviour(2, WorkerBehaviour::kAnswer);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  MakeStep(6, 40);
  absl::Status s;
  EXPECT_EQ(Compute(**remote, &s), Reference());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(fleet_->calls(2), 0);
  EXPECT_THAT((*remote)->Describe(), HasSubstr("fedcba9876543210"));
}

TEST_F(RemoteExpertsTest, ConnectRefusesAForeignFingerprintAndGaps) {
  {
    auto fleet = Fleet(2, 1);
    fleet->SetFingerprint(1, "fedcba9876543210");
    auto remote = Connect(std::move(fleet));
    EXPECT_EQ(remote.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(remote.status().message()),
                AllOf(HasSubstr("fedcba9876543210"), HasSubstr(kFingerprint)));
  }
  {
    auto owned = Rotate(2, 1);
    owned[1].erase({3, 4});
    workers_ = 2;
    auto remote = Connect(std::make_unique<FakeFleet>(
        config_.Moe(), kFingerprint, std::move(owned)));
    EXPECT_EQ(remote.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(remote.status().message()),
                HasSubstr("layer 3 experts 4"));
  }
  // One worker of two down at connect, R = 1: its experts are named (for
  // the last worker too, after the others' answers were taken).
  for (const auto& [down, experts] :
       {std::pair<int, std::string>{0, "layer 1 experts 1,3,5,7;"},
        std::pair<int, std::string>{1, "layer 1 experts 0,2,4,6;"}}) {
    SCOPED_TRACE(down);
    auto fleet = Fleet(2, 1);
    fleet->SetBehaviour(down, WorkerBehaviour::kDown);
    auto remote = Connect(std::move(fleet));
    EXPECT_EQ(remote.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(
        std::string(remote.status().message()),
        AllOf(HasSubstr(absl::StrCat("cannot reach expert worker ", down)),
              HasSubstr("Connection refused"),
              HasSubstr("(layer, expert) pairs have no live worker"),
              HasSubstr(experts)));
  }
}

}  // namespace
}  // namespace flotilla::coordinator
