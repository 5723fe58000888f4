// End-to-end checks of the flotilla-expert-worker binary: command-line
// handling, and a served instance (either front end) answering health,
// reflection, Info, Compute, ComputeStream and Prefetch over loopback gRPC,
// then stopping cleanly on SIGTERM. The polling front end's own checks:
// polling_worker_test.cc; hostile Compute calls:
// tests/distributed_hostile_test.cc.
#include <signal.h>

#include <chrono>
#include <string>
#include <vector>

#include "expert-worker/served_worker_testutil.h"

namespace {

using flotilla::expert_worker::testutil::kCkptA;
using flotilla::expert_worker::testutil::Result;
using flotilla::expert_worker::testutil::RunWorker;
using flotilla::expert_worker::testutil::ServedWorker;

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(WorkerCommandLineTest, HelpExitsZeroAndListsFlags) {
  for (const char* flag : {"--help", "-h"}) {
    const Result r = RunWorker({flag});
    EXPECT_EQ(r.exit_code, 0) << flag;
    for (const char* name :
         {"--model", "--shard", "--port", "--mem", "--threads", "usage:"}) {
      EXPECT_THAT(r.output, HasSubstr(name)) << flag;
    }
  }
}

TEST(WorkerCommandLineTest, BadFlagsNameTheFlag) {
  const struct {
    std::vector<std::string> args;
    const char* named;
  } cases[] = {
      {{}, "--model"},
      {{"--model=" + kCkptA, "--shard=2/2"}, "--shard"},
      {{"--model=" + kCkptA, "--shard=x"}, "--shard"},
      {{"--model=" + kCkptA, "--shard=0/9"}, "--shard"},  // 8 experts
      {{"--model=" + kCkptA, "--port=70000"}, "--port"},
      {{"--model=" + kCkptA, "--mem=lots"}, "--mem"},
      {{"--model=" + kCkptA, "--threads=-3"}, "--threads"},
      {{"--model=" + kCkptA, "--busy-poll-us=-1"}, "--busy-poll-us"},
      {{"--model=" + kCkptA, "--busy-poll-us=20000000"}, "--busy-poll-us"},
  };
  for (const auto& c : cases) {
    const Result r = RunWorker(c.args);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.named)) << r.output;
  }
  // An unreadable model is a runtime failure, still naming the flag.
  const Result r = RunWorker({"--model=/nonexistent/flotilla-model"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--model"));
  // Unknown flags are absl's to reject; they must not be ignored.
  EXPECT_NE(RunWorker({"--model=" + kCkptA, "--no_such_flag=1"}).exit_code, 0);
}

TEST(WorkerCommandLineTest, WithoutPortPrintsThePlan) {
  const Result r = RunWorker({"--model=" + kCkptA, "--shard=1/2"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("shard 1/2"));
  EXPECT_THAT(r.output, HasSubstr("model fingerprint "));
}

// Parameter: --busy-poll-us (0: the callback front end; > 0: the polling
// one). Both must answer alike.
class ServedWorkerTest : public ::testing::TestWithParam<int>,
                         protected ServedWorker {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(Start(GetParam())); }
  void TearDown() override { Kill(); }
};

TEST_P(ServedWorkerTest, AnswersHealthInfoComputePrefetchAndStopsOnSigterm) {
  {
    const absl::StatusOr<bool> serving =
        flotilla::transport::CheckHealthServing(channel_, 10000);
    ASSERT_TRUE(serving.ok()) << serving.status();
    EXPECT_TRUE(*serving);
  }

  {
    flotilla::v1::InfoResponse info;
    auto context = Context();
    const grpc::Status status =
        stub_->Info(context.get(), flotilla::v1::InfoRequest(), &info);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(info.shard_index(), 1u);
    EXPECT_EQ(info.shard_count(), 2u);
    EXPECT_EQ(info.num_layers(), 13u);
    EXPECT_EQ(info.num_experts(), 8u);
    EXPECT_EQ(info.row_width(), 64u);
    EXPECT_EQ(info.memory_budget_bytes(), uint64_t{1} << 30);
    EXPECT_EQ(info.compute_threads(), 2u);
    EXPECT_GT(info.max_request_bytes(), 0u);
    EXPECT_EQ(info.model_fingerprint().size(), 16u);  // FingerprintCheckpoint
    EXPECT_EQ(info.replicas(), 1u);
    EXPECT_EQ(info.placement(), "rotate-v1");
    EXPECT_THAT(info.worker_version(), StartsWith("flotilla-expert-worker"));
    // Only the polling front end serves ComputeStream.
    EXPECT_EQ(info.compute_stream(), GetParam() > 0);
    EXPECT_EQ(info.owned_experts_size(), 12);  // layers 1..12 are MoE
    EXPECT_EQ(info.owned_experts().count(0), 0u);
    ASSERT_EQ(info.owned_experts().count(5), 1u);
    // rotate-v1: primary (e + layer) mod 2 == 1.
    EXPECT_THAT(info.owned_experts().at(5).experts(), ElementsAre(0, 2, 4, 6));
  }

  {
    // Expert 0 of layer 1: (0 + 1) mod 2 == 1, owned by shard 1.
    const flotilla::v1::ComputeRequest request = OneRowRequest(64);
    flotilla::v1::ComputeResponse response;
    auto context = Context();
    const grpc::Status status =
        stub_->Compute(context.get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    // Default output kind: row sums, one double row per row with tasks.
    EXPECT_THAT(response.rows(), ElementsAre(0));
    EXPECT_EQ(response.row_sums_size(), 64);
    EXPECT_GT(response.stats().bytes_read(), 0u);
  }

  // Layer 1 expert 3 is not this shard's: ignored. Layer 2 expert 1
  // ((1 + 2) mod 2 == 1) is owned and not cached: its read is started on
  // the compute thread.
  EXPECT_EQ(PrefetchScheduled(1, 3), 0);
  EXPECT_EQ(PrefetchScheduled(2, 1), 1);

  {
    // A bad call is answered by the same front end and changes nothing.
    const flotilla::v1::ComputeRequest request = OneRowRequest(63);
    flotilla::v1::ComputeResponse response;
    auto context = Context();
    const grpc::Status status =
        stub_->Compute(context.get(), request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("row_width"));
  }

  {
    // Server reflection (gRPC's own, or the polled front end's): the
    // service list and the file that declares ExpertService.
    const std::string list("\x3a\x00", 2);  // list_services: ""
    const std::string symbol =
        std::string("\x22\x19") + "flotilla.v1.ExpertService";
    const flotilla::transport::StreamResult r = flotilla::transport::CallStream(
        channel_,
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        {list, symbol});
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    ASSERT_EQ(r.responses.size(), 2u);
    EXPECT_THAT(r.responses[0], HasSubstr("grpc.health.v1.Health"));
    EXPECT_THAT(r.responses[1], HasSubstr("flotilla/v1/expert.proto"));
  }

  std::string output;
  ASSERT_NO_FATAL_FAILURE(StopWithSigterm(&output));
}

// ComputeStream answers each request as Compute would, in order, and ends
// the stream with Compute's error status at a bad request; the callback
// front end does not serve it.
TEST_P(ServedWorkerTest, ComputeStreamAnswersInOrderAndEndsOnABadRequest) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  auto stream = stub_->ComputeStream(&context);
  flotilla::v1::ComputeResponse unary, first, second;
  {
    auto unary_context = Context();
    ASSERT_TRUE(
        stub_->Compute(unary_context.get(), OneRowRequest(64), &unary).ok());
  }
  flotilla::v1::ComputeRequest request = OneRowRequest(64);
  if (GetParam() == 0) {
    // The refusal may come before the write is taken: ignore its result.
    stream->Write(request);
    EXPECT_FALSE(stream->Read(&first));
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNIMPLEMENTED);
    return;
  }
  ASSERT_TRUE(stream->Write(request));
  ASSERT_TRUE(stream->Read(&first));
  request.set_step_id(7);
  ASSERT_TRUE(stream->Write(request));
  ASSERT_TRUE(stream->Read(&second));
  EXPECT_EQ(second.step_id(), 7u);
  // The same numbers as the unary call.
  EXPECT_THAT(first.row_sums(), ElementsAreArray(unary.row_sums()));
  EXPECT_THAT(second.row_sums(), ElementsAreArray(unary.row_sums()));
  // A bad one (row width 63) ends the stream with Compute's error.
  ASSERT_TRUE(stream->Write(OneRowRequest(63)));
  EXPECT_FALSE(stream->Read(&first));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("row_width"));
  // And the worker serves new streams after it.
  grpc::ClientContext again_context;
  auto again = stub_->ComputeStream(&again_context);
  ASSERT_TRUE(again->Write(OneRowRequest(64)));
  ASSERT_TRUE(again->Read(&first));
  EXPECT_THAT(first.row_sums(), ElementsAreArray(unary.row_sums()));
  again->WritesDone();
  EXPECT_TRUE(again->Finish().ok());
}

INSTANTIATE_TEST_SUITE_P(FrontEnds, ServedWorkerTest,
                         ::testing::Values(0, 2000),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 0 ? std::string("Callback")
                                                  : std::string("BusyPoll");
                         });

}  // namespace
