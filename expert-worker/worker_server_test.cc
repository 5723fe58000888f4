// End-to-end checks of the flotilla-expert-worker binary: command-line
// handling, and a served instance answering health, Info, Compute and
// Prefetch over loopback gRPC, then stopping cleanly on SIGTERM. Hostile
// Compute calls: tests/distributed_hostile_test.cc.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "flotilla/v1/expert.grpc.pb.h"
#include "flotilla/v1/expert.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/transport/generic_stream_testutil.h"
#include "shared/transport/transport.h"

extern char** environ;

namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

const std::string kWorker =
    std::string(FLOTILLA_BIN_DIR) + "/flotilla-expert-worker";
const std::string kCkptA = std::string(FLOTILLA_TEST_DATA_DIR) + "/k3/ckpt_A";

// A child process with stdout and stderr merged into one pipe.
struct Child {
  pid_t pid = -1;
  int out_fd = -1;
};

Child Spawn(const std::vector<std::string>& args) {
  int fds[2];
  EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(kWorker.c_str()));
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  Child child;
  const int err = posix_spawn(&child.pid, kWorker.c_str(), &actions, nullptr,
                              argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  EXPECT_EQ(err, 0) << "cannot start " << kWorker;
  child.out_fd = fds[0];
  return child;
}

// Reads one line, waiting at most until `deadline`. False on EOF/timeout.
bool ReadLine(int fd, std::chrono::steady_clock::time_point deadline,
              std::string* line) {
  line->clear();
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char c;
    const ssize_t n = read(fd, &c, 1);
    if (n <= 0) return false;
    if (c == '\n') return true;
    line->push_back(c);
  }
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  return out;
}

// Waits for exit; returns the exit status, or -1 for a signal death.
int WaitExit(pid_t pid) {
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

struct Result {
  int exit_code;
  std::string output;
};

Result RunWorker(const std::vector<std::string>& args) {
  Child child = Spawn(args);
  std::string output = ReadAll(child.out_fd);
  close(child.out_fd);
  return {WaitExit(child.pid), output};
}

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

// A worker 1 of 2 on ckpt_A, started by Start and killed (if still
// running) by Kill, with a stub on it.
class ServedWorker {
 protected:
  // Call under ASSERT_NO_FATAL_FAILURE.
  void Start(int busy_poll_us) {
    child_ = Spawn({"--model=" + kCkptA, "--shard=1/2", "--port=0",
                    "--host=127.0.0.1", "--mem=1G", "--threads=2",
                    absl::StrCat("--busy-poll-us=", busy_poll_us)});
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(60);
    std::string line;
    const std::string marker = "listening on 127.0.0.1:";
    while (ReadLine(child_.out_fd, deadline, &line)) {
      const size_t at = line.find(marker);
      if (at != std::string::npos &&
          absl::SimpleAtoi(line.substr(at + marker.size()), &port_)) {
        break;
      }
    }
    ASSERT_GT(port_, 0) << "worker did not report a port; last line: " << line;
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_),
                                   grpc::InsecureChannelCredentials());
    stub_ = flotilla::v1::ExpertService::NewStub(channel_);
  }

  void Kill() {
    if (child_.pid > 0 && !stopped_) {
      kill(child_.pid, SIGKILL);
      WaitExit(child_.pid);
    }
    if (child_.out_fd >= 0) close(child_.out_fd);
  }

  // Sends SIGTERM and returns what the worker printed until it exited
  // (exit status checked); call under ASSERT_NO_FATAL_FAILURE.
  void StopWithSigterm(std::string* output) {
    ASSERT_EQ(kill(child_.pid, SIGTERM), 0);
    // Bounded: a worker that ignores SIGTERM fails here (Kill ends it)
    // instead of hanging the suite.
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(20);
    std::string line;
    while (ReadLine(child_.out_fd, deadline, &line)) *output += line + "\n";
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "worker still running 20 s after SIGTERM";
    stopped_ = true;
    EXPECT_EQ(WaitExit(child_.pid), 0) << *output;
    EXPECT_THAT(*output, HasSubstr("SIGTERM received"));
  }

  // One row of `width` floats for expert 0 of layer 1, weight 1.
  static flotilla::v1::ComputeRequest OneRowRequest(uint32_t width) {
    flotilla::v1::ComputeRequest request;
    request.set_layer(1);
    request.set_row_width(width);
    request.set_num_rows(1);
    request.mutable_activations()->Resize(static_cast<int>(width), 0.5f);
    flotilla::v1::Assignment* a = request.add_assignments();
    a->set_row(0);
    a->set_expert(0);
    a->set_weight(1.0f);
    return request;
  }

  // Sends a one-expert Prefetch hint; the experts scheduled, or -1 (with
  // a test failure) when the call fails.
  int PrefetchScheduled(uint32_t layer, uint32_t expert) {
    flotilla::v1::PrefetchRequest request;
    request.set_layer(layer);
    request.add_experts(expert);
    flotilla::v1::PrefetchResponse response;
    auto context = Context();
    const grpc::Status status =
        stub_->Prefetch(context.get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return status.ok() ? static_cast<int>(response.experts_scheduled()) : -1;
  }

  static std::unique_ptr<grpc::ClientContext> Context() {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::seconds(10));
    return context;
  }

  Child child_;
  int port_ = 0;
  bool stopped_ = false;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<flotilla::v1::ExpertService::Stub> stub_;
};

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
  // Long (about 1 s on the 2-vCPU VM): 32768 rows through experts 0, 2, 4
  // and 6.
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
  grpc::Status long_status;
  flotilla::v1::ComputeResponse long_response;
  std::thread long_call([&] {
    auto context = Context();
    long_status =
        big_stub->Compute(context.get(), long_request, &long_response);
  });
  // Once it has arrived (8 MiB take well under this on loopback) and
  // while it runs: a one-row call with a short deadline.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  grpc::Status short_status;
  {
    grpc::ClientContext short_context;
    short_context.set_deadline(std::chrono::system_clock::now() +
                               std::chrono::milliseconds(100));
    flotilla::v1::ComputeResponse short_response;
    short_status =
        stub_->Compute(&short_context, OneRowRequest(64), &short_response);
  }
  long_call.join();
  ASSERT_TRUE(long_status.ok()) << long_status.error_message();
  // The premise: the long call held the compute thread past the short
  // call's deadline (sent 400 ms after it, due 100 ms later).
  ASSERT_GT(long_response.stats().wall_seconds(), 0.6)
      << "the long call is too quick on this machine to test this";
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
  // The long call's four experts; the short call would have added one.
  EXPECT_THAT(output, HasSubstr("experts: 4 requested")) << output;
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

INSTANTIATE_TEST_SUITE_P(FrontEnds, ServedWorkerTest,
                         ::testing::Values(0, 2000),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 0 ? std::string("Callback")
                                                  : std::string("BusyPoll");
                         });

}  // namespace
