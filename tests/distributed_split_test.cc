// Split fleets: `flotilla-tool pack --workers N --split` cuts every expert
// into N row slices and worker K (`flotilla-expert-worker --split`) holds
// slice K of every expert, so each layer's reads are shared evenly whatever
// the routing. With 1, 2 and 3 workers the generated ids and the logits are
// bitwise those of the single-process run, on ckpt_A and on a synthetic
// model whose intermediate size (96) differs from its latent width (64), so
// the two slice dimensions cannot be confused. Also: chunked calls, busy
// polling, the CLI, fleets that must be refused, malformed slice calls, and
// a worker killed mid-generation.
#include <csignal>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/transport/transport.h"
#include "tests/distributed_test_util.h"

namespace flotilla::dtest {
namespace {

using ::testing::HasSubstr;

constexpr int kTokens = 8;

class SplitTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    // ckpt_A's config with a wider expert FFN (I = 96, L = 64).
    std::ifstream in(CkptA() + "/config.json");
    nlohmann::json config = nlohmann::json::parse(in, nullptr, false);
    ASSERT_FALSE(config.is_discarded());
    config["moe_intermediate_size"] = 96;
    const std::string config_path = dir_->path() + "/wide_config.json";
    std::ofstream(config_path) << config.dump(1);
    wide_ = dir_->path() + "/wide";
    std::string out;
    ASSERT_EQ(RunCommand(absl::StrCat(BinPath("flotilla-tool"),
                                      " synth --buffered --seed 5 --config ",
                                      config_path, " --out ", wide_),
                         &out),
              0)
        << out;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  // `pack --workers n --split` of `model` (once per model and n); returns
  // the folder holding worker-0 .. worker-(n-1).
  static std::string SplitPack(const std::string& model, int n) {
    const std::string pack = absl::StrCat(
        dir_->path(), "/split_", model == CkptA() ? "a" : "wide", "_", n);
    std::string out;
    EXPECT_EQ(RunCommand(absl::StrCat(BinPath("flotilla-tool"),
                                      " pack --model ", model, " --out ", pack,
                                      " --workers ", n, " --split"),
                         &out),
              0)
        << out;
    return pack + "/workers";
  }

  // Worker k of the split pack in `workers_dir`.
  static absl::StatusOr<std::unique_ptr<WorkerProcess>> StartSliceWorker(
      const std::string& workers_dir, int k,
      const std::vector<std::string>& extra = {}, int port = 0) {
    const std::string folder = absl::StrCat(workers_dir, "/worker-", k);
    std::vector<std::string> args = {
        "--model=" + folder, "--split=" + folder + "/split.json", "--threads=1",
        "--mem=256M", "--fetch-slots=4"};
    args.insert(args.end(), extra.begin(), extra.end());
    return WorkerProcess::Start(
        args, absl::StrCat(workers_dir, "/worker", k, "_", port, ".log"), port);
  }

  static absl::StatusOr<Fleet> StartSplitFleet(
      const std::string& workers_dir, int n,
      const std::vector<std::string>& extra = {}) {
    Fleet fleet;
    for (int k = 0; k < n; ++k) {
      auto w = StartSliceWorker(workers_dir, k, extra);
      if (!w.ok()) return w.status();
      fleet.push_back(std::move(*w));
    }
    return fleet;
  }

  static TempDir* dir_;
  static std::string wide_;
};

TempDir* SplitTest::dir_ = nullptr;
std::string SplitTest::wide_;

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

// A prefill whose calls are chunked by a tiny message limit, with polling
// workers and coordinator: still bitwise.
TEST_F(SplitTest, ChunkedCallsAndBusyPollingStillMatch) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 24; ++i) prompt.push_back((i * 37 + 11) % 256);
  auto want = GenerateLocal(wide_, prompt, 4);
  ASSERT_TRUE(want.ok()) << want.status();
  auto fleet = StartSplitFleet(SplitPack(wide_, 2), 2, {"--busy-poll-us=2000"});
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  coordinator::RemoteExpertsOptions options;
  options.workers = Addresses(*fleet);
  options.max_call_bytes = 8192;  // a few tasks of width 96 per call
  options.busy_poll_us = 2000;
  auto remote = OpenRemoteModel(wide_, options);
  ASSERT_TRUE(remote.ok()) << remote.status();
  auto got = GenerateWith(**remote, prompt, 4);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->ids, want->ids);
  EXPECT_TRUE(got->logits == want->logits);
  const coordinator::RemoteStats s =
      dynamic_cast<coordinator::RemoteExperts*>((*remote)->experts())
          ->remote_stats();
  EXPECT_GT(s.calls, 2 * 2 * s.layers);  // the prefill was chunked
  // ckpt_A's workers keep 2 slices (top-2) between rounds: the prefill's
  // layers went in groups of 2 experts, and no down round read anything.
  EXPECT_EQ(s.split_down_bytes_read, 0u);
}

// A prefill routes to every expert of a layer, more than the slices a
// worker keeps between rounds: grouped by resident_experts, the down
// rounds read nothing, and the bits still match.
TEST_F(SplitTest, PrefillIsGroupedSoDownRoundsReadNothing) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 16; ++i) prompt.push_back((i * 53 + 5) % 256);
  auto want = GenerateLocal(CkptA(), prompt, 3);
  ASSERT_TRUE(want.ok()) << want.status();
  auto fleet = StartSplitFleet(SplitPack(CkptA(), 2), 2);
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  coordinator::RemoteExpertsOptions options;
  options.workers = Addresses(*fleet);
  auto remote = OpenRemoteModel(CkptA(), options);
  ASSERT_TRUE(remote.ok()) << remote.status();
  auto got = GenerateWith(**remote, prompt, 3);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->ids, want->ids);
  EXPECT_TRUE(got->logits == want->logits);
  const coordinator::RemoteStats s =
      dynamic_cast<coordinator::RemoteExperts*>((*remote)->experts())
          ->remote_stats();
  EXPECT_GT(s.calls, 2 * 2 * s.layers);  // the prefill went in groups
  EXPECT_GT(s.worker_bytes_read, 0u);
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

TEST_F(SplitTest, FleetsThatDoNotTileTheExpertsAreRefused) {
  const std::string workers_dir = SplitPack(CkptA(), 3);
  auto s0 = StartSliceWorker(workers_dir, 0);
  ASSERT_TRUE(s0.ok()) << s0.status();
  auto s1 = StartSliceWorker(workers_dir, 1);
  ASSERT_TRUE(s1.ok()) << s1.status();
  auto connect = [](const std::vector<std::string>& workers, bool row_sums) {
    coordinator::RemoteExpertsOptions options;
    options.workers = workers;
    options.row_sums = row_sums;
    options.connect_timeout_ms = 10000;
    return OpenRemoteModel(CkptA(), options).status();
  };
  // Two of three slices.
  absl::Status s = connect({(*s0)->address(), (*s1)->address()}, false);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("slice 0 of 3"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("lists 2 workers"));
  // A split worker beside one holding whole experts.
  auto whole = WorkerProcess::Start(
      {"--model=" + CkptA(), "--shard=1/2", "--threads=1", "--mem=256M"},
      workers_dir + "/whole.log");
  ASSERT_TRUE(whole.ok()) << whole.status();
  s = connect({(*s0)->address(), (*whole)->address()}, false);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("a fleet is either split or not"));
  // Row sums are not defined for slices.
  auto s2 = StartSliceWorker(workers_dir, 2);
  ASSERT_TRUE(s2.ok()) << s2.status();
  s = connect({(*s0)->address(), (*s1)->address(), (*s2)->address()}, true);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("--row-sums"));
  // The same three in another order are a valid fleet.
  s = connect({(*s2)->address(), (*s0)->address(), (*s1)->address()}, false);
  EXPECT_TRUE(s.ok()) << s;
}

TEST_F(SplitTest, WorkerFlagsThatContradictASplitAreUsageErrors) {
  const std::string folder = SplitPack(CkptA(), 2) + "/worker-1";
  const std::string worker = BinPath("flotilla-expert-worker");
  std::string out;
  EXPECT_EQ(RunCommand(absl::StrCat(worker, " --model ", folder, " --split ",
                                    folder, "/split.json --replicas 2"),
                       &out),
            2)
      << out;
  EXPECT_THAT(out, HasSubstr("--split"));
  EXPECT_EQ(RunCommand(absl::StrCat(worker, " --model ", folder, " --split ",
                                    folder, "/split.json --shard 0/2"),
                       &out),
            2)
      << out;
  EXPECT_THAT(out, HasSubstr("disagrees with"));
  EXPECT_NE(RunCommand(absl::StrCat(worker, " --model ", folder,
                                    " --split /nonexistent/split.json"),
                       &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("/nonexistent/split.json"));
  // Whole experts served as if they were slices: refused when the worker
  // opens them to serve (`timeout` only guards against a hang).
  EXPECT_NE(
      RunCommand(absl::StrCat("timeout 60 ", worker, " --model ", CkptA(),
                              " --port 0 --split ", folder, "/split.json"),
                 &out),
      0)
      << out;
  EXPECT_THAT(out, HasSubstr("w1/w3 [32,64]"));
  // Without --port the plan is printed: it names the rows held.
  ASSERT_EQ(RunCommand(absl::StrCat(worker, " --model ", folder, " --split ",
                                    folder, "/split.json"),
                       &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("rows [32, 64) of w1/w3 and [32, 64) of w2"));
}

// A slice call for `layer` 2 with two rows of `width` and two tasks.
v1::ComputeRequest SliceRequest(v1::OutputKind kind, uint32_t width) {
  v1::ComputeRequest q;
  q.set_layer(2);
  q.set_row_width(width);
  q.set_num_rows(2);
  q.set_output(kind);
  q.mutable_activations()->Resize(2 * width, 0.25f);
  for (auto [row, expert] : {std::pair{0, 1}, std::pair{1, 7}}) {
    v1::Assignment* a = q.add_assignments();
    a->set_row(row);
    a->set_expert(expert);
    a->set_weight(0.5f);
  }
  return q;
}

// Malformed or misdirected calls get INVALID_ARGUMENT naming the problem,
// and the worker answers well-formed slice calls afterwards.
TEST_F(SplitTest, MalformedSliceCallsAreRejectedAndTheWorkerStaysHealthy) {
  auto split = StartSliceWorker(SplitPack(wide_, 2), 0);  // I [0,48) L [0,32)
  ASSERT_TRUE(split.ok()) << split.status();
  auto whole = WorkerProcess::Start(
      {"--model=" + wide_, "--shard=0/1", "--threads=1", "--mem=256M"},
      dir_->path() + "/whole_hostile.log");
  ASSERT_TRUE(whole.ok()) << whole.status();
  auto call = [](const WorkerProcess& w, const v1::ComputeRequest& q,
                 v1::ComputeResponse* r) {
    auto channel =
        grpc::CreateChannel(w.address(), grpc::InsecureChannelCredentials());
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    return v1::ExpertService::NewStub(channel)->Compute(&context, q, r);
  };
  using K = v1::OutputKind;
  struct Bad {
    v1::ComputeRequest request;
    const char* says;
  };
  std::vector<Bad> bad = {
      {SliceRequest(v1::OUTPUT_KIND_EXPERT_OUTPUTS, 64), "split placement"},
      {SliceRequest(v1::OUTPUT_KIND_ROW_SUMS, 64), "split placement"},
      {SliceRequest(v1::OUTPUT_KIND_GATE_UP_SLICE, 96), "latent width is 64"},
      {SliceRequest(v1::OUTPUT_KIND_DOWN_SLICE, 64), "of width 96"},
      {SliceRequest(static_cast<K>(9), 64), "unknown output kind"},
  };
  bad.push_back({SliceRequest(v1::OUTPUT_KIND_DOWN_SLICE, 96), "activations"});
  bad.back().request.mutable_activations()->RemoveLast();
  bad.push_back({SliceRequest(v1::OUTPUT_KIND_GATE_UP_SLICE, 64), "expert 8"});
  bad.back().request.mutable_assignments(1)->set_expert(8);
  for (const Bad& b : bad) {
    v1::ComputeResponse r;
    const grpc::Status s = call(**split, b.request, &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << b.says << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(b.says));
  }
  v1::ComputeResponse r;
  grpc::Status s =
      call(**whole, SliceRequest(v1::OUTPUT_KIND_GATE_UP_SLICE, 64), &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("need a split worker"));
  // Still healthy: both slice kinds answered with the slice's widths.
  s = call(**split, SliceRequest(v1::OUTPUT_KIND_GATE_UP_SLICE, 64), &r);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(r.slice_outputs_size(), 2 * 48);
  s = call(**split, SliceRequest(v1::OUTPUT_KIND_DOWN_SLICE, 96), &r);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(r.slice_outputs_size(), 2 * 32);
  auto channel = grpc::CreateChannel((*split)->address(),
                                     grpc::InsecureChannelCredentials());
  const absl::StatusOr<bool> serving =
      transport::CheckHealthServing(channel, 10000);
  EXPECT_TRUE(serving.ok() && *serving);
}

// kill -9 of a slice worker mid-generation: the request fails within its
// deadline naming the worker and its rows; the coordinator stays up and
// serves again, bitwise, once the worker is back on its address.
TEST_F(SplitTest, KilledWorkerFailsTheRequestThenServesAgain) {
  auto want = GenerateLocal(CkptA(), kPrompt, kTokens);
  ASSERT_TRUE(want.ok()) << want.status();
  const std::string workers_dir = SplitPack(CkptA(), 2);
  auto fleet = StartSplitFleet(workers_dir, 2);
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
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable)
      << failed.status();
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr(victim));
  EXPECT_THAT(std::string(failed.status().message()),
              HasSubstr("rows [32, 64) of w1/w3"));
  auto back = StartSliceWorker(workers_dir, 1, {}, victim_port);
  ASSERT_TRUE(back.ok()) << back.status();
  absl::StatusOr<Generation> again =
      GenerateWhenBack(**model, kPrompt, kTokens);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->ids, want->ids);
  EXPECT_TRUE(again->logits == want->logits);
}

}  // namespace
}  // namespace flotilla::dtest
