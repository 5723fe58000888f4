// End-to-end checks of the flotilla-expert-worker binary: command-line
// handling, and a served instance answering health, reflection, Info,
// Compute and Prefetch over loopback gRPC, refusing the deprecated
// ComputeStream, then stopping cleanly on SIGTERM. Hostile Compute calls:
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

using ::testing::ElementsAre;
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
    // The busy-poll front end is gone, and its flags with it.
    EXPECT_THAT(r.output, Not(HasSubstr("busy-poll"))) << flag;
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

class ServedWorkerTest : public ::testing::Test, protected ServedWorker {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(Start()); }
  void TearDown() override { Kill(); }
};

TEST_F(ServedWorkerTest, AnswersHealthInfoComputePrefetchAndStopsOnSigterm) {
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
    // A bad call is refused and changes nothing.
    const flotilla::v1::ComputeRequest request = OneRowRequest(63);
    flotilla::v1::ComputeResponse response;
    auto context = Context();
    const grpc::Status status =
        stub_->Compute(context.get(), request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("row_width"));
  }

  {
    // gRPC's own server reflection: the service list and the file that
    // declares ExpertService.
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

// ComputeStream is deprecated (it only ever saved a wake-up per layer of
// the busy-poll front end, since removed): the worker refuses it, and goes
// on answering Compute.
TEST_F(ServedWorkerTest, RefusesTheDeprecatedComputeStream) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  auto stream = stub_->ComputeStream(&context);
  flotilla::v1::ComputeResponse response;
  // The refusal may come before the write is taken: ignore its result.
  stream->Write(OneRowRequest(64));
  EXPECT_FALSE(stream->Read(&response));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNIMPLEMENTED);
  auto unary_context = Context();
  const grpc::Status status =
      stub_->Compute(unary_context.get(), OneRowRequest(64), &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.row_sums_size(), 64);
}

// Issue 44 item 6: without --host the worker listens on this machine only,
// and says where and whether TLS is on.
class DefaultHostWorkerTest : public ::testing::Test, protected ServedWorker {
 protected:
  void TearDown() override { Kill(); }
};

TEST_F(DefaultHostWorkerTest, BindsLoopbackAndSaysTlsIsOff) {
  ASSERT_NO_FATAL_FAILURE(Start({}, /*default_host=*/true));
  EXPECT_THAT(listen_line_,
              ::testing::MatchesRegex("flotilla-expert-worker: listening on "
                                      "127\\.0\\.0\\.1:[0-9]+ \\(no TLS: "
                                      "plaintext\\)"));
  const absl::StatusOr<bool> serving =
      flotilla::transport::CheckHealthServing(channel_, 10000);
  ASSERT_TRUE(serving.ok()) << serving.status();
  EXPECT_TRUE(*serving);
}

}  // namespace
