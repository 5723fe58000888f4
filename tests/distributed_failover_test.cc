// Worker failures in the middle of a generation, with a long-lived
// coordinator (the in-test driver: a K3Model with RemoteExperts; the
// `generate` CLI is one-shot, so "stays up and serves again" is tested on
// the library the CLI uses):
//  * R = 2: kill -9 of a worker mid-generation -> same ids; a hung worker
//    (SIGSTOP) -> its calls time out and go to the replica -> same ids.
//  * R = 2: a worker killed before the coordinator starts -> it starts on
//    the other two, same ids; the worker restarted -> it is used again.
//  * R = 1: after kill -9 the request fails within its deadline naming the
//    missing worker and experts; the coordinator keeps serving requests
//    (errors, no crash) and serves correctly again once the worker is back.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/base/elapsed.h"
#include "shared/pack/pack_manifest.h"
#include "tests/distributed_test_util.h"

namespace flotilla::dtest {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

constexpr int kTokens = 10;

using base::SecondsSince;

class FailoverTest : public ::testing::Test {};

TEST_F(FailoverTest, KillNineWithTwoReplicasKeepsTheIds) {
  TempDir dir;
  auto want = GenerateLocal(CkptA(), kPrompt, kTokens);
  ASSERT_TRUE(want.ok()) << want.status();
  auto fleet = StartFleet(CkptA(), 3, 2, dir.path());
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  coordinator::RemoteExpertsOptions options;
  options.workers = Addresses(*fleet);
  options.rpc_deadline_ms = 5000;
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

TEST_F(FailoverTest, KilledBeforeStartWithTwoReplicasThenRestarted) {
  TempDir dir;
  auto want = GenerateLocal(CkptA(), kPrompt, kTokens);
  ASSERT_TRUE(want.ok()) << want.status();
  auto fleet = StartFleet(CkptA(), 3, 2, dir.path());
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  const int victim_port = (*fleet)[1]->port();
  (*fleet)[1]->Signal(SIGKILL);
  coordinator::RemoteExpertsOptions options;
  options.workers = Addresses(*fleet);
  options.rpc_deadline_ms = 5000;
  options.retry_backoff_ms = 100;
  const Clock::time_point start = Clock::now();
  auto model = OpenRemoteModel(CkptA(), options);
  ASSERT_TRUE(model.ok()) << model.status();
  // The quick Info round, not the 30 s connect timeout.
  EXPECT_LT(SecondsSince(start), 10.0);
  auto got = GenerateWith(**model, kPrompt, kTokens);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->ids, want->ids);
  EXPECT_TRUE(got->logits == want->logits);
  auto* remote = dynamic_cast<coordinator::RemoteExperts*>((*model)->experts());
  ASSERT_NE(remote, nullptr);
  EXPECT_EQ(remote->remote_stats().workers[1].compute.count(), 0u);
  EXPECT_FALSE(remote->remote_stats().workers[1].up);

  // Restarted on its address: a later request's probe takes it back.
  std::vector<std::string> flags = {"--model=" + CkptA(), "--shard=1/3",
                                    "--replicas=2",       "--threads=1",
                                    "--mem=256M",         "--fetch-slots=4"};
  auto back =
      WorkerProcess::Start(flags, dir.path() + "/restarted.log", victim_port);
  ASSERT_TRUE(back.ok()) << back.status();
  for (int attempt = 0; attempt < 50; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    auto again = GenerateWith(**model, kPrompt, kTokens);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->ids, want->ids);
    if (remote->remote_stats().workers[1].compute.count() > 0) break;
  }
  EXPECT_GT(remote->remote_stats().workers[1].compute.count(), 0u);
  EXPECT_TRUE(remote->remote_stats().workers[1].up);
}

// One replica's copy of the checkpoint has a flipped byte in every expert
// (data only, so its pack stays fresh): the worker on it fails each call
// with DATA_LOSS from its own checksums, and the coordinator completes the
// steps from the replicas: the same ids and logits, the error kept.
TEST_F(FailoverTest, AFlippedByteInOneReplicaKeepsTheIds) {
  namespace fs = std::filesystem;
  TempDir dir;
  auto want = GenerateLocal(CkptA(), kPrompt, kTokens);
  ASSERT_TRUE(want.ok()) << want.status();
  const std::string bad = dir.path() + "/bad";
  fs::copy(CkptA(), bad, fs::copy_options::recursive);
  std::string output;
  ASSERT_EQ(RunCommand(absl::StrCat(BinPath("flotilla-tool"),
                                    " pack --model=", bad, " 2>&1"),
                       &output),
            0)
      << output;
  auto manifest = pack::LoadPackManifest(bad + "/flotilla-pack");
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  ASSERT_FALSE(manifest->experts.empty());
  for (const pack::PackExpert& e : manifest->experts) {
    ASSERT_TRUE(XorByte(bad + "/" + manifest->expert_files[e.file],
                        e.offset + e.length / 2, 0x10)
                    .ok());
  }
  Fleet fleet;
  for (int k = 0; k < 3; ++k) {
    auto w =
        WorkerProcess::Start({"--model=" + (k == 2 ? bad : CkptA()),
                              absl::StrCat("--shard=", k, "/3"), "--replicas=2",
                              "--threads=1", "--mem=256M", "--fetch-slots=4"},
                             absl::StrCat(dir.path(), "/w", k, ".log"));
    ASSERT_TRUE(w.ok()) << w.status();
    fleet.push_back(*std::move(w));
  }
  coordinator::RemoteExpertsOptions options;
  options.workers = Addresses(fleet);
  options.rpc_deadline_ms = 5000;
  options.retry_backoff_ms = 60000;  // keep the bad worker's error in view
  auto model = OpenRemoteModel(CkptA(), options);
  ASSERT_TRUE(model.ok()) << model.status();
  auto got = GenerateWith(**model, kPrompt, kTokens);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->ids, want->ids);
  EXPECT_TRUE(got->logits == want->logits);
  auto* remote = dynamic_cast<coordinator::RemoteExperts*>((*model)->experts());
  ASSERT_NE(remote, nullptr);
  const coordinator::RemoteStats stats = remote->remote_stats();
  EXPECT_GE(stats.workers[2].compute_failed, 1u);
  EXPECT_EQ(stats.workers[0].compute_failed + stats.workers[1].compute_failed,
            0u);
  EXPECT_GE(stats.retried_calls, 1u);
  EXPECT_THAT(remote->Describe(),
              AllOf(HasSubstr("DATA_LOSS"), HasSubstr("checksum mismatch"),
                    HasSubstr("model.safetensors at offset")));
  EXPECT_THAT(fleet[2]->Log(), HasSubstr("checksum mismatch"));
}

TEST_F(FailoverTest, HungWorkerTimesOutAndTheReplicaAnswers) {
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
  // The hung worker's call ran into its deadline once (its worker is then
  // left alone for the backoff), and the replica answered the retry. A
  // generous bound only catches a hang, never a slow machine.
  auto* remote = dynamic_cast<coordinator::RemoteExperts*>((*model)->experts());
  ASSERT_NE(remote, nullptr);
  EXPECT_EQ(remote->remote_stats().failed_calls, 1u);
  EXPECT_EQ(remote->remote_stats().retried_calls, 1u);
  EXPECT_THAT(remote->Describe(), HasSubstr("DEADLINE_EXCEEDED"));
  EXPECT_LT(seconds, 60.0);
}

TEST_F(FailoverTest, OneReplicaFailsWithinDeadlineThenServesAgain) {
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
  auto failed = GenerateWith(**model, kPrompt, kTokens, [&](int32_t) {
    if (++tokens == 3) (*fleet)[1]->Signal(SIGKILL);
    return true;
  });
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  const std::string message(failed.status().message());
  std::printf("request after kill -9 -> %s\n",
              failed.status().ToString().c_str());
  EXPECT_THAT(message, HasSubstr(victim));
  EXPECT_THAT(message, HasSubstr("expert"));
  EXPECT_THAT(message, HasSubstr("layer "));

  // A dead worker refuses the connection: the layer fails on that, not by
  // waiting out the deadline.
  EXPECT_THAT(message, Not(HasSubstr("DEADLINE_EXCEEDED")));

  // The coordinator stays up: new requests fail cleanly...
  auto still_down = GenerateWith(**model, kPrompt, 2);
  EXPECT_FALSE(still_down.ok());
  EXPECT_THAT(std::string(still_down.status().message()), HasSubstr(victim));

  // ...and serve again once the worker is back on its address.
  std::vector<std::string> flags = {"--model=" + CkptA(), "--shard=1/2",
                                    "--threads=1", "--mem=256M",
                                    "--fetch-slots=4"};
  auto back =
      WorkerProcess::Start(flags, dir.path() + "/restarted.log", victim_port);
  ASSERT_TRUE(back.ok()) << back.status();
  absl::StatusOr<Generation> again =
      GenerateWhenBack(**model, kPrompt, kTokens);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->ids, want->ids);
  EXPECT_TRUE(again->logits == want->logits);
}

}  // namespace
}  // namespace flotilla::dtest
