// Worker failures in the middle of a generation, with a long-lived
// coordinator (the in-test driver: a K3Model with RemoteExperts; the
// `generate` CLI is one-shot, so "stays up and serves again" is tested on
// the library the CLI uses):
//  * R = 2: kill -9 of a worker mid-generation -> same ids; a hung worker
//    (SIGSTOP) -> its calls time out and go to the replica -> same ids.
//  * R = 1: after kill -9 the request fails within its deadline naming the
//    missing worker and experts; the coordinator keeps serving requests
//    (errors, no crash) and serves correctly again once the worker is back.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/base/elapsed.h"
#include "tests/distributed_test_util.h"

namespace flotilla::dtest {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

constexpr int kTokens = 10;

using base::SecondsSince;

// Parameter: --busy-poll-us of workers and coordinator (0: callback API
// and blocking waits; > 0: both poll). Failover must not depend on it.
class KillNineTest : public ::testing::TestWithParam<int> {};

TEST_P(KillNineTest, KillNineWithTwoReplicasKeepsTheIds) {
  TempDir dir;
  auto want = GenerateLocal(CkptA(), kPrompt, kTokens);
  ASSERT_TRUE(want.ok()) << want.status();
  std::vector<std::string> extra;
  if (GetParam() > 0)
    extra.push_back(absl::StrCat("--busy-poll-us=", GetParam()));
  auto fleet = StartFleet(CkptA(), 3, 2, dir.path(), extra);
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  coordinator::RemoteExpertsOptions options;
  options.workers = Addresses(*fleet);
  options.rpc_deadline_ms = 5000;
  options.busy_poll_us = GetParam();
  auto model = OpenRemoteModel(CkptA(), options);
  ASSERT_TRUE(model.ok()) << model.status();

  int tokens = 0;
  auto got = GenerateWith(**model, kPrompt, kTokens, [&](int32_t) {
    if (++tokens == 3) (*fleet)[1]->Signal(SIGKILL);  // mid-generation
    return true;
  });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->ids, want->ids);
  EXPECT_TRUE(got->logits == want->logits);
  auto* remote = dynamic_cast<coordinator::RemoteExperts*>((*model)->experts());
  EXPECT_GE(remote->remote_stats().failed_calls, 1u);
  EXPECT_GE(remote->remote_stats().retried_calls, 1u);
  EXPECT_THAT(remote->Describe(), HasSubstr("down"));

  // Later requests skip the dead worker and still match.
  auto again = GenerateWith(**model, kPrompt, kTokens);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->ids, want->ids);
}

INSTANTIATE_TEST_SUITE_P(FailoverTest, KillNineTest, ::testing::Values(0, 2000),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 0 ? std::string("Callback")
                                                  : std::string("BusyPoll");
                         });

TEST(FailoverTest, HungWorkerTimesOutAndTheReplicaAnswers) {
  TempDir dir;
  auto want = GenerateLocal(CkptA(), kPrompt, 4);
  ASSERT_TRUE(want.ok()) << want.status();
  auto fleet = StartFleet(CkptA(), 2, 2, dir.path());
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  coordinator::RemoteExpertsOptions options;
  options.workers = Addresses(*fleet);
  options.rpc_deadline_ms = 400;
  options.retry_backoff_ms = 60000;  // stay off the hung worker
  auto model = OpenRemoteModel(CkptA(), options);
  ASSERT_TRUE(model.ok()) << model.status();
  (*fleet)[0]->Signal(SIGSTOP);
  const Clock::time_point start = Clock::now();
  auto got = GenerateWith(**model, kPrompt, 4);
  const double seconds = SecondsSince(start);
  (*fleet)[0]->Signal(SIGCONT);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->ids, want->ids);
  // One deadline, then everything on the replica.
  EXPECT_GE(seconds, 0.4);
  EXPECT_LT(seconds, 10.0);
}

TEST(FailoverTest, OneReplicaFailsWithinDeadlineThenServesAgain) {
  TempDir dir;
  auto want = GenerateLocal(CkptA(), kPrompt, kTokens);
  ASSERT_TRUE(want.ok()) << want.status();
  auto fleet = StartFleet(CkptA(), 2, 1, dir.path());
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  const std::string victim = (*fleet)[1]->address();
  const int victim_port = (*fleet)[1]->port();
  coordinator::RemoteExpertsOptions options;
  options.workers = Addresses(*fleet);
  options.rpc_deadline_ms = 2000;
  options.retry_backoff_ms = 100;
  auto model = OpenRemoteModel(CkptA(), options);
  ASSERT_TRUE(model.ok()) << model.status();

  int tokens = 0;
  Clock::time_point killed;
  auto failed = GenerateWith(**model, kPrompt, kTokens, [&](int32_t) {
    if (++tokens == 3) {
      (*fleet)[1]->Signal(SIGKILL);
      killed = Clock::now();
    }
    return true;
  });
  ASSERT_FALSE(failed.ok());
  EXPECT_LT(SecondsSince(killed), 2.0 + 1.0) << "not within the deadline";
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  const std::string message(failed.status().message());
  std::printf("request after kill -9 -> %s\n",
              failed.status().ToString().c_str());
  EXPECT_THAT(message, HasSubstr(victim));
  EXPECT_THAT(message, HasSubstr("expert"));
  EXPECT_THAT(message, HasSubstr("layer "));

  // The coordinator stays up: new requests fail fast and cleanly...
  const Clock::time_point start = Clock::now();
  auto still_down = GenerateWith(**model, kPrompt, 2);
  EXPECT_FALSE(still_down.ok());
  EXPECT_THAT(std::string(still_down.status().message()), HasSubstr(victim));
  EXPECT_LT(SecondsSince(start), 2.0 + 1.0);

  // ...and serve again once the worker is back on its address.
  auto back =
      WorkerProcess::Start({"--model=" + CkptA(), "--shard=1/2", "--threads=1",
                            "--mem=256M", "--fetch-slots=4"},
                           dir.path() + "/restarted.log", victim_port);
  ASSERT_TRUE(back.ok()) << back.status();
  absl::StatusOr<Generation> again =
      GenerateWhenBack(**model, kPrompt, kTokens);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->ids, want->ids);
  EXPECT_TRUE(again->logits == want->logits);
}

}  // namespace
}  // namespace flotilla::dtest
