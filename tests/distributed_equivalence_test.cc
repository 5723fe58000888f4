// With 1, 2 and 3 expert workers (processes on loopback) the generated ids
// equal the single-process run, on ckpt_A and on a synthetic k3-tiny model:
//  * default (per-assignment outputs): logits bitwise identical;
//  * row-sums mode: ids identical, logits within 1e-6;
// also with replicas, through the `flotilla-coordinator generate --workers`
// CLI (whose --json reports the RPC counters), and from per-worker folders
// written by `flotilla-tool pack --workers`.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/distributed_test_util.h"

namespace flotilla::dtest {
namespace {

constexpr int kTokens = 8;

class EquivalenceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    synth_ = dir_->path() + "/synth";
    ASSERT_TRUE(Synth(synth_, 7).ok());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  // Runs `model` on n workers with r replicas and compares with `want`.
  void ExpectSameAsLocal(const std::string& model, const Generation& want,
                         int n, int r, bool row_sums) {
    SCOPED_TRACE(absl::StrCat(model, " N=", n, " R=", r,
                              row_sums ? " row sums" : " outputs"));
    auto fleet = StartFleet(model, n, r, dir_->path());
    ASSERT_TRUE(fleet.ok()) << fleet.status();
    coordinator::RemoteExpertsOptions options;
    options.workers = Addresses(*fleet);
    options.row_sums = row_sums;
    auto remote = OpenRemoteModel(model, options);
    ASSERT_TRUE(remote.ok()) << remote.status();
    auto got = GenerateWith(**remote, kPrompt, kTokens);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->ids, want.ids);
    if (row_sums) {
      EXPECT_LE(MaxAbsDiff(got->logits, want.logits), 1e-6);
    } else {
      ASSERT_EQ(got->logits.size(), want.logits.size());
      EXPECT_TRUE(got->logits == want.logits)
          << "logits not bitwise equal, "
          << "max diff " << MaxAbsDiff(got->logits, want.logits);
    }
    auto* experts =
        dynamic_cast<coordinator::RemoteExperts*>((*remote)->experts());
    ASSERT_NE(experts, nullptr);
    const coordinator::RemoteStats& s = experts->remote_stats();
    // One call per worker holding a routed expert, per MoE layer per step:
    // never more calls than workers x layers.
    EXPECT_GT(s.layers, 0u);
    EXPECT_LE(s.calls, s.layers * static_cast<uint64_t>(n));
    EXPECT_EQ(s.failed_calls, 0u);
    EXPECT_GT((*remote)->experts()->backend_stats().bytes_read, 0u);
  }

  static TempDir* dir_;
  static std::string synth_;
};

TempDir* EquivalenceTest::dir_ = nullptr;
std::string EquivalenceTest::synth_;

TEST_F(EquivalenceTest, CkptAWithOneTwoThreeWorkers) {
  auto want = GenerateLocal(CkptA(), kPrompt, kTokens);
  ASSERT_TRUE(want.ok()) << want.status();
  for (int n : {1, 2, 3}) ExpectSameAsLocal(CkptA(), *want, n, 1, false);
  ExpectSameAsLocal(CkptA(), *want, 3, 2, false);
  for (int n : {2, 3}) ExpectSameAsLocal(CkptA(), *want, n, 1, true);
}

TEST_F(EquivalenceTest, SyntheticModelWithOneTwoThreeWorkers) {
  auto want = GenerateLocal(synth_, kPrompt, kTokens);
  ASSERT_TRUE(want.ok()) << want.status();
  for (int n : {1, 2, 3}) ExpectSameAsLocal(synth_, *want, n, 1, false);
  ExpectSameAsLocal(synth_, *want, 3, 3, false);
  ExpectSameAsLocal(synth_, *want, 3, 1, true);
}

// A long prefill whose calls are split by rows (tiny message limit): each
// expert's rows then arrive in several calls, and the logits still match.
TEST_F(EquivalenceTest, SplitCallsStillMatch) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 24; ++i) prompt.push_back((i * 37 + 11) % 256);
  auto want = GenerateLocal(CkptA(), prompt, 4);
  ASSERT_TRUE(want.ok()) << want.status();
  auto fleet = StartFleet(CkptA(), 2, 1, dir_->path());
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  coordinator::RemoteExpertsOptions options;
  options.workers = Addresses(*fleet);
  options.max_call_bytes = 8192;  // about 16 tasks of width 64 per call
  auto remote = OpenRemoteModel(CkptA(), options);
  ASSERT_TRUE(remote.ok()) << remote.status();
  auto got = GenerateWith(**remote, prompt, 4);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->ids, want->ids);
  EXPECT_TRUE(got->logits == want->logits);
  const auto& s =
      dynamic_cast<coordinator::RemoteExperts*>((*remote)->experts())
          ->remote_stats();
  EXPECT_GT(s.calls, 2 * s.layers);  // the prefill was split
}

// Workers on another SIMD path than the coordinator's (--simd) return the
// same bits: the logits equal the single-process run's.
TEST_F(EquivalenceTest, WorkersOnOtherSimdLevelsMatch) {
  auto want = GenerateLocal(CkptA(), kPrompt, kTokens);
  ASSERT_TRUE(want.ok()) << want.status();
  for (const char* level : {"scalar", "highway"}) {
    SCOPED_TRACE(level);
    auto fleet = StartFleet(CkptA(), 2, 1, dir_->path(),
                            {absl::StrCat("--simd=", level)});
    ASSERT_TRUE(fleet.ok()) << fleet.status();
    EXPECT_NE(
        (*fleet)[0]->Log().find(absl::StrCat("SIMD kernels: ", level, "\n")),
        std::string::npos)
        << (*fleet)[0]->Log();
    coordinator::RemoteExpertsOptions options;
    options.workers = Addresses(*fleet);
    auto got = GenerateOnWorkers(CkptA(), options, kPrompt, kTokens);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->generation.ids, want->ids);
    EXPECT_TRUE(got->generation.logits == want->logits);
  }
  std::string out;
  EXPECT_EQ(RunCommand(absl::StrCat(BinPath("flotilla-expert-worker"),
                                    " --model ", CkptA(), " --simd neon9"),
                       &out),
            2)
      << out;
  EXPECT_NE(out.find("--simd: unknown SIMD level"), std::string::npos) << out;
}

// The command line a user runs: same JSON ids with and without --workers.
TEST_F(EquivalenceTest, CoordinatorCliWithWorkers) {
  const std::string base =
      absl::StrCat(BinPath("flotilla-coordinator"), " generate --model ",
                   CkptA(), " --ids 3,7,11,5,9 --max-tokens 6 --json");
  std::string local_out;
  ASSERT_EQ(RunCommand(base, &local_out), 0) << local_out;
  const auto a = nlohmann::json::parse(local_out, nullptr, false);
  ASSERT_FALSE(a.is_discarded()) << local_out;
  EXPECT_FALSE(a["stats"].contains("remote"));  // no workers, no RPCs
  auto fleet = StartFleet(CkptA(), 2, 1, dir_->path());
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  // The same command with --workers and `flags`: same generated ids.
  auto expect_same_ids = [&](const std::string& flags) {
    SCOPED_TRACE(flags);
    std::string out;
    ASSERT_EQ(RunCommand(absl::StrCat(base, " --workers ",
                                      absl::StrJoin(Addresses(*fleet), ","),
                                      " ", flags),
                         &out),
              0)
        << out;
    const auto b = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(b.is_discarded()) << out;
    EXPECT_EQ(a["generated_ids"], b["generated_ids"]);
    EXPECT_GT(b["generated_ids"].size(), 0u);
  };
  expect_same_ids("--rpc-deadline-ms 5000");

  // Streaming trunk from a pack (the fingerprint then comes from the
  // manifest) with the experts on the workers.
  const std::string pack = dir_->path() + "/cli_pack";
  std::string out;
  ASSERT_EQ(RunCommand(absl::StrCat(BinPath("flotilla-tool"), " pack --model ",
                                    CkptA(), " --out ", pack),
                       &out),
            0)
      << out;
  std::string packed_out;
  ASSERT_EQ(RunCommand(
                absl::StrCat(base, " --pack ", pack, " --mem 1G", " --workers ",
                             absl::StrJoin(Addresses(*fleet), ",")),
                &packed_out),
            0)
      << packed_out;
  const auto c = nlohmann::json::parse(packed_out, nullptr, false);
  ASSERT_FALSE(c.is_discarded()) << packed_out;
  EXPECT_EQ(a["generated_ids"], c["generated_ids"]);
  EXPECT_EQ(c["stats"]["mode"], "streaming");
}

// `generate --workers ... --json` reports the RPC counters under
// stats.remote, with and without --expert-prefetch; the ids do not change.
TEST_F(EquivalenceTest, CoordinatorCliReportsRpcCounters) {
  auto fleet = StartFleet(CkptA(), 2, 2, dir_->path());
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  const std::string base = absl::StrCat(
      BinPath("flotilla-coordinator"), " generate --model ", CkptA(),
      " --ids 3,7,11,5,9 --max-tokens 6 --json --workers ",
      absl::StrJoin(Addresses(*fleet), ","));
  nlohmann::json runs[2];
  for (int prefetch : {0, 1}) {
    SCOPED_TRACE(prefetch ? "--expert-prefetch" : "no prefetch");
    std::string out;
    ASSERT_EQ(RunCommand(base + (prefetch ? " --expert-prefetch"
                                          : " --expert-prefetch=false"),
                         &out),
              0)
        << out;
    runs[prefetch] = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(runs[prefetch].is_discarded()) << out;
    const nlohmann::json& r = runs[prefetch]["stats"]["remote"];
    ASSERT_TRUE(r.is_object()) << out;
    // ckpt_A: 12 MoE layers, top-2 experts of width 64, 5 decode steps.
    // A decode layer routes its one row to 2 distinct experts, both held by
    // both workers (R = 2): the dealer gives one to each, so exactly two
    // calls per layer (one would mean the deal did not balance).
    EXPECT_EQ(r["moe_layers"], 12 * 5);
    EXPECT_EQ(r["calls"], 12 * 5 * 2);
    EXPECT_EQ(r["calls_per_layer"].get<double>(), 2.0);
    EXPECT_EQ(r["retried_calls"], 0);
    EXPECT_EQ(r["failed_calls"], 0);
    // Activations out, 2 unweighted outputs per row back, per MoE layer.
    EXPECT_GE(r["request_bytes_per_token"].get<double>(), 12 * 64 * 4);
    EXPECT_GE(r["response_bytes_per_token"].get<double>(), 12 * 2 * 64 * 4);
    const double p50 = r["rpc_overhead_ms_per_layer_p50"];
    const double p90 = r["rpc_overhead_ms_per_layer_p90"];
    EXPECT_GT(p50, 0.0);
    EXPECT_GE(p90, p50);
    EXPECT_LT(p90, 1000.0);
    EXPECT_GT(r["rpc_overhead_ms_per_layer_mean"].get<double>(), 0.0);
    // Both workers read: with every read on one of them the share would be
    // 1 (it is not exactly 0.5 because an expert still resident on its
    // worker from an earlier step costs no read).
    EXPECT_LT(r["busiest_worker_share"].get<double>(), 0.9);
    EXPECT_EQ(r["prefetch_hints_failed"], 0);
    EXPECT_EQ(r["prefetch_hints_dropped"], 0);
    if (prefetch) {
      // The 2 predicted experts of each MoE layer per step are dealt like
      // the layer's call: one to each worker, so one hint to each.
      EXPECT_EQ(r["prefetch_hints_sent"].get<int>(), 12 * 5 * 2);
      EXPECT_GT(r["prefetch_experts_scheduled"].get<int>(), 0);
      EXPECT_GT(runs[prefetch]["stats"]["expert_prefetch_hits_per_token"]
                    .get<double>(),
                0.0);
    } else {
      EXPECT_EQ(r["prefetch_hints_sent"], 0);
    }
  }
  EXPECT_EQ(runs[0]["generated_ids"], runs[1]["generated_ids"]);

  // --stats without --json prints the same object on stderr.
  std::string text;
  ASSERT_EQ(RunCommand(absl::StrCat(BinPath("flotilla-coordinator"),
                                    " generate --model ", CkptA(),
                                    " --ids 3,7,11 --max-tokens 3 --stats "
                                    "--workers ",
                                    absl::StrJoin(Addresses(*fleet), ",")),
                       &text),
            0)
      << text;
  EXPECT_THAT(text, ::testing::HasSubstr("\"remote\""));
  EXPECT_THAT(text, ::testing::HasSubstr("\"busiest_worker_share\""));
}

// `flotilla-tool pack --workers 3 --replicas 2`: each worker serves only its
// own folder (which holds only its share), with the source's fingerprint.
TEST_F(EquivalenceTest, WorkersServePackWorkersFolders) {
  auto want = GenerateLocal(synth_, kPrompt, kTokens);
  ASSERT_TRUE(want.ok()) << want.status();
  const std::string pack = dir_->path() + "/pack";
  std::string out;
  ASSERT_EQ(RunCommand(
                absl::StrCat(BinPath("flotilla-tool"), " pack --model ", synth_,
                             " --out ", pack, " --workers 3 --replicas 2"),
                &out),
            0)
      << out;
  Fleet fleet;
  for (int k = 0; k < 3; ++k) {
    const std::string folder = absl::StrCat(pack, "/workers/worker-", k);
    auto w = WorkerProcess::Start(
        {"--model=" + folder, "--placement=" + folder + "/placement.json",
         "--threads=1", "--mem=256M", "--fetch-slots=4"},
        absl::StrCat(dir_->path(), "/packworker", k, ".log"));
    ASSERT_TRUE(w.ok()) << w.status();
    fleet.push_back(std::move(*w));
  }
  coordinator::RemoteExpertsOptions options;
  options.workers = Addresses(fleet);
  auto remote = OpenRemoteModel(synth_, options);
  ASSERT_TRUE(remote.ok()) << remote.status();
  auto got = GenerateWith(**remote, kPrompt, kTokens);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->ids, want->ids);
  EXPECT_TRUE(got->logits == want->logits);
}

}  // namespace
}  // namespace flotilla::dtest
