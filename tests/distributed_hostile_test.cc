// Hostile or malformed Compute and Prefetch calls against a real worker:
// each gets INVALID_ARGUMENT naming the problem, a call past the worker's
// --mem gets RESOURCE_EXHAUSTED naming the bytes, and the worker stays
// healthy (health SERVING, a well-formed call still answered) after every
// one of them.

#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/transport/transport.h"
#include "tests/distributed_test_util.h"

namespace flotilla::dtest {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<grpc::ClientContext> Context() {
  auto c = std::make_unique<grpc::ClientContext>();
  c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return c;
}

bool Serving(const std::shared_ptr<grpc::Channel>& channel) {
  const absl::StatusOr<bool> serving =
      transport::CheckHealthServing(channel, 10000);
  return serving.ok() && *serving;
}

// A well-formed call for worker 0 of 2 on ckpt_A: layer 2 expert 0 is owned
// ((0 + 2) mod 2 == 0).
v1::ComputeRequest GoodRequest() {
  v1::ComputeRequest q;
  q.set_layer(2);
  q.set_row_width(64);
  q.set_num_rows(2);
  q.set_output(v1::OUTPUT_KIND_EXPERT_OUTPUTS);
  q.mutable_activations()->Resize(128, 0.25f);
  for (auto [row, expert] : {std::pair{0, 0}, std::pair{1, 2}}) {
    v1::Assignment* a = q.add_assignments();
    a->set_row(row);
    a->set_expert(expert);
    a->set_weight(0.5f);
  }
  return q;
}

// Every test here runs against its own worker 0 of 2 on ckpt_A (one
// thread), started by StartWorker with the test's memory flags.
class HostileWorkerTest : public ::testing::Test {
 protected:
  // Starts the worker with `flags` after the common ones and opens a stub
  // on it; call it under ASSERT_NO_FATAL_FAILURE.
  void StartWorker(const std::vector<std::string>& flags) {
    std::vector<std::string> args = {"--model=" + CkptA(), "--shard=0/2",
                                     "--threads=1"};
    args.insert(args.end(), flags.begin(), flags.end());
    auto worker = WorkerProcess::Start(args, dir_.path() + "/worker.log");
    ASSERT_TRUE(worker.ok()) << worker.status();
    worker_ = *std::move(worker);
    channel_ = grpc::CreateChannel(worker_->address(),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::ExpertService::NewStub(channel_);
  }

  // Torn down bottom up: the stub and channel, the worker (killed), and
  // last the directory holding its log.
  TempDir dir_;
  std::unique_ptr<WorkerProcess> worker_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ExpertService::Stub> stub_;
};

// One fixture under the suite names the tests have always had.
using HostileComputeTest = HostileWorkerTest;
using HostilePrefetchTest = HostileWorkerTest;

TEST_F(HostileComputeTest, MalformedCallsAreRejectedAndTheWorkerStaysHealthy) {
  ASSERT_NO_FATAL_FAILURE(StartWorker({"--mem=256M"}));
  const float nan = std::numeric_limits<float>::quiet_NaN();

  struct Case {
    const char* name;
    const char* says;
    std::function<void(v1::ComputeRequest*)> edit;
  };
  const std::vector<Case> cases = {
      {"dense layer", "dense layer", [](auto* q) { q->set_layer(0); }},
      {"unknown layer", "does not exist", [](auto* q) { q->set_layer(13); }},
      {"huge layer", "does not exist",
       [](auto* q) { q->set_layer(4000000000u); }},
      {"expert not owned", "not owned",
       [](auto* q) { q->mutable_assignments(0)->set_expert(1); }},
      {"expert out of range", "does not exist",
       [](auto* q) { q->mutable_assignments(0)->set_expert(8); }},
      {"huge expert", "out of range",
       [](auto* q) { q->mutable_assignments(0)->set_expert(4000000000u); }},
      {"wrong row width", "latent width",
       [](auto* q) { q->set_row_width(63); }},
      {"too few activations", "activations hold",
       [](auto* q) { q->mutable_activations()->RemoveLast(); }},
      {"rows disagree", "activations hold",
       [](auto* q) { q->set_num_rows(3); }},
      {"no rows", "num_rows", [](auto* q) { q->set_num_rows(0); }},
      {"huge row count", "num_rows",
       [](auto* q) { q->set_num_rows(4000000000u); }},
      {"row out of range", "not below num_rows",
       [](auto* q) { q->mutable_assignments(1)->set_row(2); }},
      {"no assignments", "assignments",
       [](auto* q) { q->clear_assignments(); }},
      {"duplicate pair", "more than once",
       [](auto* q) { *q->add_assignments() = q->assignments(0); }},
      {"nan weight", "not finite",
       [nan](auto* q) { q->mutable_assignments(0)->set_weight(nan); }},
      {"huge assignment count", "assignments",
       [](auto* q) {
         for (int i = 0; i < 300000; ++i)
           *q->add_assignments() = q->assignments(0);
       }},
      {"unknown output kind", "output kind",
       [](auto* q) { q->set_output(static_cast<v1::OutputKind>(7)); }},
  };
  for (const Case& c : cases) {
    v1::ComputeRequest request = GoodRequest();
    c.edit(&request);
    v1::ComputeResponse response;
    auto context = Context();
    const grpc::Status s = stub_->Compute(context.get(), request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.name;
    EXPECT_THAT(s.error_message(), HasSubstr(c.says)) << c.name;
    ASSERT_TRUE(Serving(channel_)) << "unhealthy after: " << c.name;
  }

  // Still computing: the good call gets one output row per assignment.
  v1::ComputeResponse response;
  auto context = Context();
  const grpc::Status s =
      stub_->Compute(context.get(), GoodRequest(), &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.expert_outputs_size(), 2 * 64);
  EXPECT_EQ(response.layer(), 2u);
  EXPECT_GT(response.stats().bytes_read(), 0u);
  EXPECT_GT(response.stats().wall_seconds(), 0.0);
  EXPECT_TRUE(worker_->running());
}

TEST_F(HostilePrefetchTest, MalformedHintsAreRejectedAndTheWorkerStaysHealthy) {
  ASSERT_NO_FATAL_FAILURE(StartWorker({"--mem=256M"}));
  auto prefetch = [&](uint32_t layer, std::vector<uint32_t> experts,
                      v1::PrefetchResponse* response) {
    v1::PrefetchRequest request;
    request.set_layer(layer);
    request.mutable_experts()->Add(experts.begin(), experts.end());
    auto context = Context();
    return stub_->Prefetch(context.get(), request, response);
  };
  struct Case {
    const char* name;
    const char* says;
    uint32_t layer;
    std::vector<uint32_t> experts;
  };
  const std::vector<Case> cases = {
      {"dense layer", "dense layer", 0, {0}},
      {"unknown layer", "does not exist", 13, {0}},
      {"huge layer", "does not exist", 4000000000u, {0}},
      {"expert out of range", "does not exist", 2, {0, 8}},
      {"huge expert", "does not exist", 2, {4000000000u}},
      {"more experts than the layer has", "more than the 8", 2,
       std::vector<uint32_t>(100000, 0)},
  };
  for (const Case& c : cases) {
    v1::PrefetchResponse response;
    const grpc::Status s = prefetch(c.layer, c.experts, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.name;
    EXPECT_THAT(s.error_message(), HasSubstr(c.says)) << c.name;
    ASSERT_TRUE(Serving(channel_)) << "unhealthy after: " << c.name;
  }
  // Experts it does not own are ignored (the wire contract), owned ones
  // scheduled: layer 2 experts 0, 2 are worker 0's, 1 and 3 are not.
  v1::PrefetchResponse response;
  const grpc::Status s = prefetch(2, {0, 1, 2, 3, 2}, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.experts_scheduled(), 2u);
  // The good Compute that follows uses both reads.
  v1::ComputeResponse computed;
  auto context = Context();
  const grpc::Status c =
      stub_->Compute(context.get(), GoodRequest(), &computed);
  ASSERT_TRUE(c.ok()) << c.error_message();
  EXPECT_EQ(computed.stats().prefetch_hits(), 2u);
  EXPECT_EQ(computed.stats().experts_computed(), 2u);
}

// A call whose buffers would pass the worker's --mem is refused before it
// is queued, naming the bytes asked and left; the charge of every call
// ends with the call (a leak would refuse the repeated mid-size calls).
TEST_F(HostileComputeTest, CallsBeyondTheMemoryBudgetAreResourceExhausted) {
  // 16 MiB: the fetch slots and kept scratch fit, with a few MiB left.
  ASSERT_NO_FATAL_FAILURE(StartWorker({"--mem=16M", "--fetch-slots=2"}));
  // `rows` rows, each routed to experts 0 and 2 of layer 2.
  auto request = [](uint32_t rows) {
    v1::ComputeRequest q;
    q.set_layer(2);
    q.set_row_width(64);
    q.set_num_rows(rows);
    q.set_output(v1::OUTPUT_KIND_EXPERT_OUTPUTS);
    q.mutable_activations()->Resize(static_cast<int>(rows * 64), 0.25f);
    for (uint32_t r = 0; r < rows; ++r) {
      for (uint32_t e : {0u, 2u}) {
        v1::Assignment* a = q.add_assignments();
        a->set_row(r);
        a->set_expert(e);
        a->set_weight(0.5f);
      }
    }
    return q;
  };
  // 8192 rows: 4 MiB of outputs, about 30 MiB in all.
  {
    v1::ComputeResponse response;
    auto context = Context();
    const grpc::Status s =
        stub_->Compute(context.get(), request(8192), &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(s.error_message(), HasSubstr("the call needs "));
    EXPECT_THAT(s.error_message(), HasSubstr(" bytes (request, response"));
    EXPECT_THAT(s.error_message(), HasSubstr("are left"));
    EXPECT_THAT(s.error_message(), HasSubstr("16777216-byte --mem budget"));
    ASSERT_TRUE(Serving(channel_));
  }
  // 1024 rows (about 4 MiB in all): fits, again and again.
  for (int i = 0; i < 5; ++i) {
    v1::ComputeResponse response;
    auto context = Context();
    const grpc::Status s =
        stub_->Compute(context.get(), request(1024), &response);
    ASSERT_TRUE(s.ok()) << "call " << i << ": " << s.error_message();
    EXPECT_EQ(response.expert_outputs_size(), 2 * 1024 * 64);
  }
  EXPECT_TRUE(Serving(channel_));
  EXPECT_TRUE(worker_->running());
}

}  // namespace
}  // namespace flotilla::dtest
