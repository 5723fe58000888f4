// Split fleets that must fail cleanly: fleets whose slices do not tile the
// experts, worker flags that contradict a split, malformed or misdirected
// slice calls (INVALID_ARGUMENT, the worker stays healthy), and a slice
// worker killed mid-generation (the request fails naming it; the
// coordinator serves again once it is back).
#include <chrono>
#include <csignal>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/base/elapsed.h"
#include "shared/transport/transport.h"
#include "tests/distributed_test_util.h"
#include "tests/split_fleet_fixture.h"

namespace flotilla::dtest {
namespace {

using ::testing::HasSubstr;

constexpr int kTokens = 8;

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

// A hung slice worker (SIGSTOP): the request fails on its deadline (the
// error says DEADLINE_EXCEEDED), naming the worker. The wall-clock bound
// only catches a hang; a loaded machine may take longer than the deadline.
TEST_F(SplitTest, HungWorkerFailsTheRequestWithinItsDeadline) {
  auto fleet = StartSplitFleet(SplitPack(CkptA(), 2), 2);
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  coordinator::RemoteExpertsOptions options;
  options.workers = Addresses(*fleet);
  options.rpc_deadline_ms = 500;
  auto model = OpenRemoteModel(CkptA(), options);
  ASSERT_TRUE(model.ok()) << model.status();
  (*fleet)[0]->Signal(SIGSTOP);
  const auto start = std::chrono::steady_clock::now();
  auto failed = GenerateWith(**model, kPrompt, 2);
  const double seconds = base::SecondsSince(start);
  (*fleet)[0]->Signal(SIGCONT);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(failed.status().message()),
              HasSubstr((*fleet)[0]->address()));
  EXPECT_THAT(std::string(failed.status().message()),
              HasSubstr("DEADLINE_EXCEEDED"));
  EXPECT_LT(seconds, 60.0) << "hung";
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
