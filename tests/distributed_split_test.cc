// Split fleets: `flotilla-tool pack --workers N --split` cuts every expert
// into N row slices and worker K (`flotilla-expert-worker --split`) holds
// slice K of every expert, so each layer's reads are shared evenly whatever
// the routing. With 1, 2 and 3 workers the generated ids and the logits are
// bitwise those of the single-process run, on ckpt_A and on a synthetic
// model with I != L; also with chunked calls, with a prefill grouped by the
// slices a worker keeps, and through the CLI. Refusals, malformed calls and
// failures: distributed_split_refusal_test.cc.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/distributed_test_util.h"
#include "tests/split_fleet_fixture.h"

namespace flotilla::dtest {
namespace {

constexpr int kTokens = 8;

TEST_F(SplitTest, OneTwoThreeWorkersMatchTheSingleProcessRunBitwise) {
  for (const std::string& model : {CkptA(), wide_}) {
    auto want = GenerateLocal(model, kPrompt, kTokens);
    ASSERT_TRUE(want.ok()) << want.status();
    for (int n : {1, 2, 3}) {
      SCOPED_TRACE(absl::StrCat(model, " split over ", n, " workers"));
      auto fleet = StartSplitFleet(SplitPack(model, n), n);
      ASSERT_TRUE(fleet.ok()) << fleet.status();
      coordinator::RemoteExpertsOptions options;
      options.workers = Addresses(*fleet);
      auto remote = OpenRemoteModel(model, options);
      ASSERT_TRUE(remote.ok()) << remote.status();
      auto got = GenerateWith(**remote, kPrompt, kTokens);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->ids, want->ids);
      ASSERT_EQ(got->logits.size(), want->logits.size());
      EXPECT_TRUE(got->logits == want->logits)
          << "max diff " << MaxAbsDiff(got->logits, want->logits);
      const coordinator::RemoteStats s =
          dynamic_cast<coordinator::RemoteExperts*>((*remote)->experts())
              ->remote_stats();
      // Two rounds per MoE layer (per group of 2 experts in the prefill),
      // one call per worker in each; no down round read anything.
      EXPECT_GT(s.layers, 0u);
      EXPECT_GE(s.calls, 2 * s.layers * n);
      EXPECT_EQ(s.calls % (2 * n), 0u);
      EXPECT_EQ(s.split_down_bytes_read, 0u);
      EXPECT_EQ(s.failed_calls, 0u);
      // Every worker reads its slice of every routed expert: the busiest
      // reads its fair share (slices differ by at most one row).
      EXPECT_GT(s.worker_bytes_read, 0u);
      EXPECT_LE(static_cast<double>(s.busiest_worker_bytes) * n,
                1.1 * static_cast<double>(s.worker_bytes_read))
          << s.busiest_worker_bytes << " of " << s.worker_bytes_read;
    }
  }
}

// A prefill whose calls are chunked by a tiny message limit: still
// bitwise. It routes to every expert of a
// layer, more than the slices a worker keeps between rounds, so it also
// shows the grouping by resident_experts: the down rounds read nothing.
TEST_F(SplitTest, ChunkedGroupedPrefillStillMatches) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 24; ++i) prompt.push_back((i * 37 + 11) % 256);
  auto want = GenerateLocal(wide_, prompt, 4);
  ASSERT_TRUE(want.ok()) << want.status();
  auto fleet = StartSplitFleet(SplitPack(wide_, 2), 2);
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  coordinator::RemoteExpertsOptions options;
  options.workers = Addresses(*fleet);
  options.max_call_bytes = 8192;  // a few tasks of width 96 per call
  auto run = GenerateOnWorkers(wide_, options, prompt, 4);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->generation.ids, want->ids);
  EXPECT_TRUE(run->generation.logits == want->logits);
  const coordinator::RemoteStats& s = run->stats;
  EXPECT_GT(s.calls, 2 * 2 * s.layers);  // the prefill was chunked
  // The workers keep 2 slices (top-2) between rounds: the prefill's
  // layers went in groups of 2 experts, and no down round read anything.
  EXPECT_EQ(s.split_down_bytes_read, 0u);
}

// The command line: same JSON ids with and without the split fleet, with
// prefetch hints sent to every worker.
TEST_F(SplitTest, CoordinatorCliWithASplitFleet) {
  const std::string base =
      absl::StrCat(BinPath("flotilla-coordinator"), " generate --model ", wide_,
                   " --ids 3,7,11,5,9 --max-tokens 6 --json");
  std::string local_out;
  ASSERT_EQ(RunCommand(base, &local_out), 0) << local_out;
  const auto a = nlohmann::json::parse(local_out, nullptr, false);
  ASSERT_FALSE(a.is_discarded()) << local_out;
  auto fleet = StartSplitFleet(SplitPack(wide_, 3), 3);
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  std::string out;
  ASSERT_EQ(RunCommand(absl::StrCat(base, " --expert-prefetch --workers ",
                                    absl::StrJoin(Addresses(*fleet), ",")),
                       &out),
            0)
      << out;
  const auto b = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(b.is_discarded()) << out;
  EXPECT_EQ(a["generated_ids"], b["generated_ids"]);
  const nlohmann::json& r = b["stats"]["remote"];
  EXPECT_EQ(r["calls_per_layer"].get<double>(), 6.0);  // 2 rounds x 3
  EXPECT_EQ(r["failed_calls"], 0);
  // One hint per MoE layer per step, to each of the 3 workers.
  EXPECT_GE(r["prefetch_hints_sent"].get<int>(), 3 * 12 * 5);
}

}  // namespace
}  // namespace flotilla::dtest
