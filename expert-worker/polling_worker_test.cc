// Checks of the worker's polling front end (--busy-poll-us) that the
// callback one has no counterpart for: calls that waited past their
// deadline, the compute thread as the only gRPC poller, and a shutdown that
// ends open health watches and ComputeStreams.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "expert-worker/served_worker_testutil.h"

namespace {

using flotilla::expert_worker::testutil::ReadLine;
using flotilla::expert_worker::testutil::ServedWorker;
using flotilla::expert_worker::testutil::WaitExit;

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

class PollingWorkerTest : public ::testing::Test, protected ServedWorker {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(Start(2000)); }
  void TearDown() override { Kill(); }
};

// A call that waited inside gRPC, past its deadline, while an earlier call
// held the compute thread is answered without computing: its client has
// given up. The worker's exit line counts the experts it was asked to
// fetch, so the skipped call must not add to it.
TEST_F(PollingWorkerTest, SkipsCallsThatWaitedPastTheirDeadline) {
  // Long (0.3 s to 1 s on the 2-vCPU VM): 32768 rows through experts 0,
  // 2, 4 and 6.
  flotilla::v1::ComputeRequest long_request = OneRowRequest(64);
  long_request.set_num_rows(1 << 15);
  long_request.mutable_activations()->Resize(64 << 15, 0.5f);
  for (uint32_t row = 0; row < (1u << 15); ++row) {
    for (uint32_t expert : {0u, 2u, 4u, 6u}) {
      if (row == 0 && expert == 0) continue;  // OneRowRequest's
      flotilla::v1::Assignment* a = long_request.add_assignments();
      a->set_row(row);
      a->set_expert(expert);
      a->set_weight(1.0f);
    }
  }
  // Its 32 MiB answer needs a channel that takes more than gRPC's 4 MiB.
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  auto big_stub = flotilla::v1::ExpertService::NewStub(
      grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port_),
                                grpc::InsecureChannelCredentials(), args));
  // How long it takes here, so that the short call below falls inside the
  // next run of it on any machine (0.3 s to over 1 s seen).
  grpc::Status long_status;
  flotilla::v1::ComputeResponse long_response;
  {
    auto context = Context();
    long_status =
        big_stub->Compute(context.get(), long_request, &long_response);
  }
  ASSERT_TRUE(long_status.ok()) << long_status.error_message();
  const double measured = long_response.stats().wall_seconds();
  ASSERT_GT(measured, 0.1) << "the long call is too quick to time against";
  long_response.Clear();
  std::thread long_call([&] {
    auto context = Context();
    long_status =
        big_stub->Compute(context.get(), long_request, &long_response);
  });
  // Once it has arrived (8 MiB take a few ms on loopback; at least 100 ms
  // are left for it) and while it runs: a one-row call due at 40% of the
  // long call's time.
  const auto sleep = std::chrono::milliseconds(
      static_cast<int64_t>(std::max(100.0, 250 * measured)));
  const auto deadline = std::chrono::milliseconds(
      static_cast<int64_t>(std::max(30.0, 150 * measured)));
  std::this_thread::sleep_for(sleep);
  grpc::Status short_status;
  {
    grpc::ClientContext short_context;
    short_context.set_deadline(std::chrono::system_clock::now() + deadline);
    flotilla::v1::ComputeResponse short_response;
    short_status =
        stub_->Compute(&short_context, OneRowRequest(64), &short_response);
  }
  long_call.join();
  ASSERT_TRUE(long_status.ok()) << long_status.error_message();
  // The premise: the long call held the compute thread past the short
  // call's deadline.
  ASSERT_GT(long_response.stats().wall_seconds(),
            1e-3 * static_cast<double>((sleep + deadline).count()))
      << "the long call ran much faster than its first run";
  EXPECT_EQ(short_status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);

  // A worker's shutdown waits, up to its 5 s drain, for client connections
  // to close after its GOAWAY. These two did not close on their own (with
  // either front end): one carried the call its deadline cancelled, the
  // other the 32 MiB answer. Closed here, the stop takes milliseconds.
  big_stub.reset();
  stub_.reset();
  channel_.reset();
  std::string output;
  ASSERT_NO_FATAL_FAILURE(StopWithSigterm(&output));
  // The long call's four experts, twice; the short call would have added
  // one.
  EXPECT_THAT(output, HasSubstr("experts: 8 requested")) << output;
}

// Calls that come at gaps longer than the poll (2 ms here): from the
// second gap on, the worker sleeps until shortly before the next call is
// due (next_call_timer.h), and the answers do not change; with
// --busy-poll-when-due=false it never does.
void SendSpacedCalls(const flotilla::v1::ComputeRequest& request,
                     flotilla::v1::ExpertService::Stub* stub,
                     std::vector<std::vector<double>>* outputs) {
  for (int i = 0; i < 6; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(15));
    flotilla::v1::ComputeResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    const grpc::Status status = stub->Compute(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    outputs->emplace_back(response.row_sums().begin(),
                          response.row_sums().end());
  }
}

TEST_F(PollingWorkerTest, SleepsThroughLongGapsUntilTheNextCallIsDue) {
  std::vector<std::vector<double>> outputs;
  ASSERT_NO_FATAL_FAILURE(
      SendSpacedCalls(OneRowRequest(64), stub_.get(), &outputs));
  for (const auto& o : outputs) EXPECT_EQ(o, outputs.front());
  EXPECT_FALSE(outputs.front().empty());
  stub_.reset();
  channel_.reset();
  std::string output;
  ASSERT_NO_FATAL_FAILURE(StopWithSigterm(&output));
  // Five gaps, of which the first is not known yet when it is waited.
  int waits = -1;
  const std::string marker = "polling: ";
  const size_t at = output.find(marker);
  ASSERT_NE(at, std::string::npos) << output;
  ASSERT_TRUE(absl::SimpleAtoi(
      output.substr(at + marker.size(),
                    output.find(' ', at + marker.size()) - at - marker.size()),
      &waits))
      << output;
  EXPECT_GE(waits, 4) << output;
  EXPECT_LE(waits, 5) << output;
}

class PollingAtOnceWorkerTest : public ::testing::Test, protected ServedWorker {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(Start(2000, {"--busy-poll-when-due=false"}));
  }
  void TearDown() override { Kill(); }
};

TEST_F(PollingAtOnceWorkerTest, NeverSleepsUntilDue) {
  std::vector<std::vector<double>> outputs;
  ASSERT_NO_FATAL_FAILURE(
      SendSpacedCalls(OneRowRequest(64), stub_.get(), &outputs));
  stub_.reset();
  channel_.reset();
  std::string output;
  ASSERT_NO_FATAL_FAILURE(StopWithSigterm(&output));
  EXPECT_THAT(output, HasSubstr("polling: 0 waits slept")) << output;
}

// The point of the polling front end: its thread is the process's only
// gRPC poller, so no thread of gRPC's callback API ("nexting_thread") or
// sync API ("grpcpp_sync_ser") may exist; either would take the polling
// over (polling_front_end.cc). And a health Watch sees the shutdown.
TEST_F(PollingWorkerTest, OnlyTheComputeThreadPollsAndWatchSeesShutdown) {
  ASSERT_TRUE(flotilla::transport::CheckHealthServing(channel_, 10000).ok());
  std::vector<std::string> threads;
  for (const auto& task : std::filesystem::directory_iterator(
           absl::StrCat("/proc/", child_.pid, "/task"))) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    threads.push_back(name);
  }
  EXPECT_THAT(threads, Contains("flotilla-expert"));  // the process is read
  EXPECT_THAT(threads, Not(Contains("nexting_thread")));
  EXPECT_THAT(threads, Not(Contains("grpcpp_sync_ser")));

  std::string output;
  const flotilla::transport::StreamResult watch =
      flotilla::transport::CallStream(
          channel_, "/grpc.health.v1.Health/Watch", {""}, -1, [&](int n) {
            if (n == 1) {
              ASSERT_EQ(kill(child_.pid, SIGTERM), 0);
            }
          });
  EXPECT_TRUE(watch.status.ok()) << watch.status.error_message();
  EXPECT_THAT(watch.responses, ElementsAre(std::string("\x08\x01", 2),
                                           std::string("\x08\x02", 2)));
  stub_.reset();
  channel_.reset();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::string line;
  while (ReadLine(child_.out_fd, deadline, &line)) output += line + "\n";
  stopped_ = true;
  EXPECT_EQ(WaitExit(child_.pid), 0) << output;
  EXPECT_THAT(output, HasSubstr("SIGTERM received"));
}

// A coordinator keeps its ComputeStream open between calls. On SIGTERM the
// worker ends it (UNAVAILABLE, or CANCELLED while it waits for a request)
// instead of waiting out its drain time for it, and exits promptly.
TEST_F(PollingWorkerTest, ShutdownEndsOpenComputeStreams) {
  auto context = std::make_unique<grpc::ClientContext>();
  auto stream = stub_->ComputeStream(context.get());
  flotilla::v1::ComputeResponse response;
  ASSERT_TRUE(stream->Write(OneRowRequest(64)));
  ASSERT_TRUE(stream->Read(&response));  // the stream is up and idle

  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(child_.pid, SIGTERM), 0);
  EXPECT_FALSE(stream->Read(&response));
  const grpc::Status status = stream->Finish();
  EXPECT_FALSE(status.ok());
  EXPECT_TRUE(status.error_code() == grpc::StatusCode::UNAVAILABLE ||
              status.error_code() == grpc::StatusCode::CANCELLED)
      << status.error_code() << " " << status.error_message();
  // The client's connection must close too (the context holds it): a
  // shutting-down server waits, up to its drain time, for connections.
  stream.reset();
  context.reset();
  stub_.reset();
  channel_.reset();
  std::string output, line;
  const auto deadline = start + std::chrono::seconds(20);
  while (ReadLine(child_.out_fd, deadline, &line)) output += line + "\n";
  stopped_ = true;
  EXPECT_EQ(WaitExit(child_.pid), 0) << output;
  // Well under the 5 s drain that an open stream would otherwise hold.
  EXPECT_LT(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count(),
      4.0)
      << output;
}

}  // namespace
