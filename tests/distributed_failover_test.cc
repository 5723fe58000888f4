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

// Parameter: --busy-poll-us of the workers and of the coordinator (0:
// callback API, unary calls and blocking waits; > 0: both poll, and layers
// go over the workers' ComputeStreams; a coordinator polling 1 us sleeps
// until each layer is due, so its deadlines are also met from that sleep).
// Failover must not depend on it.
struct Polling {
  int worker_us;
  int coordinator_us;
};

class FailoverTest : public ::testing::TestWithParam<Polling> {
 protected:
  void SetPolling(coordinator::RemoteExpertsOptions* options) const {
    options->busy_poll_us = GetParam().coordinator_us;
    // PollWhenDue: no timer slack, so that ckpt_A's sub-ms layers are
    // timed too.
    if (GetParam().coordinator_us == 1) options->poll_timer_slack_us = 0;
  }
  // The workers' extra flags for the parameter.
  std::vector<std::string> WorkerFlags() const {
    if (GetParam().worker_us == 0) return {};
    return {absl::StrCat("--busy-poll-us=", GetParam().worker_us)};
  }
  // With polling, the calls must have gone over streams (else this would
  // test the unary path twice), and with a 1 us poll some waits timed.
  void ExpectStreamsUsed(coordinator::K3Model& model) const {
    auto* remote = dynamic_cast<coordinator::RemoteExperts*>(model.experts());
    ASSERT_NE(remote, nullptr);
    const coordinator::RemoteStats s = remote->remote_stats();
    if (GetParam().worker_us > 0) {
      EXPECT_GT(s.streamed_calls, 0u);
    } else {
      EXPECT_EQ(s.streamed_calls, 0u);
    }
    // (With a 2 ms poll a loaded machine may time some layers too.)
    if (GetParam().coordinator_us == 1) EXPECT_GT(s.timed_waits, 0u);
    if (GetParam().coordinator_us == 0) EXPECT_EQ(s.timed_waits, 0u);
  }
};

TEST_P(FailoverTest, KillNineWithTwoReplicasKeepsTheIds) {
  TempDir dir;
  auto want = GenerateLocal(CkptA(), kPrompt, kTokens);
  ASSERT_TRUE(want.ok()) << want.status();
  auto fleet = StartFleet(CkptA(), 3, 2, dir.path(), WorkerFlags());
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  coordinator::RemoteExpertsOptions options;
  options.workers = Addresses(*fleet);
  options.rpc_deadline_ms = 5000;
  SetPolling(&options);
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
  ExpectStreamsUsed(**model);
}

TEST_P(FailoverTest, HungWorkerTimesOutAndTheReplicaAnswers) {
  TempDir dir;
  auto want = GenerateLocal(CkptA(), kPrompt, 4);
  ASSERT_TRUE(want.ok()) << want.status();
  auto fleet = StartFleet(CkptA(), 2, 2, dir.path(), WorkerFlags());
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  coordinator::RemoteExpertsOptions options;
  options.workers = Addresses(*fleet);
  options.rpc_deadline_ms = 400;
  options.retry_backoff_ms = 60000;  // stay off the hung worker
  SetPolling(&options);
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
  ExpectStreamsUsed(**model);
}

TEST_P(FailoverTest, OneReplicaFailsWithinDeadlineThenServesAgain) {
  TempDir dir;
  auto want = GenerateLocal(CkptA(), kPrompt, kTokens);
  ASSERT_TRUE(want.ok()) << want.status();
  auto fleet = StartFleet(CkptA(), 2, 1, dir.path(), WorkerFlags());
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  const std::string victim = (*fleet)[1]->address();
  const int victim_port = (*fleet)[1]->port();
  coordinator::RemoteExpertsOptions options;
  options.workers = Addresses(*fleet);
  options.rpc_deadline_ms = 2000;
  options.retry_backoff_ms = 100;
  SetPolling(&options);
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
  std::vector<std::string> flags = {"--model=" + CkptA(), "--shard=1/2",
                                    "--threads=1", "--mem=256M",
                                    "--fetch-slots=4"};
  for (const std::string& f : WorkerFlags()) flags.push_back(f);
  auto back =
      WorkerProcess::Start(flags, dir.path() + "/restarted.log", victim_port);
  ASSERT_TRUE(back.ok()) << back.status();
  absl::StatusOr<Generation> again =
      GenerateWhenBack(**model, kPrompt, kTokens);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->ids, want->ids);
  EXPECT_TRUE(again->logits == want->logits);
  ExpectStreamsUsed(**model);
}

INSTANTIATE_TEST_SUITE_P(FrontEnds, FailoverTest,
                         ::testing::Values(Polling{0, 0}, Polling{2000, 2000},
                                           Polling{2000, 1}),
                         [](const ::testing::TestParamInfo<Polling>& info) {
                           if (info.param.worker_us == 0)
                             return std::string("Callback");
                           return std::string(info.param.coordinator_us == 1
                                                  ? "PollWhenDue"
                                                  : "BusyPoll");
                         });

}  // namespace
}  // namespace flotilla::dtest
