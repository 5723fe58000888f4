// Test helpers for the flotilla-expert-worker binary: spawning it with
// stdout and stderr on one pipe, reading its lines with a deadline, and a
// served worker (ckpt_A, shard 1 of 2) with a stub. Header-only; tests only.
#ifndef FLOTILLA_EXPERT_WORKER_SERVED_WORKER_TESTUTIL_H_
#define FLOTILLA_EXPERT_WORKER_SERVED_WORKER_TESTUTIL_H_

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

namespace flotilla::expert_worker::testutil {

using ::testing::HasSubstr;

inline const std::string kWorker =
    std::string(FLOTILLA_BIN_DIR) + "/flotilla-expert-worker";
inline const std::string kCkptA =
    std::string(FLOTILLA_TEST_DATA_DIR) + "/k3/ckpt_A";

// A child process with stdout and stderr merged into one pipe.
struct Child {
  pid_t pid = -1;
  int out_fd = -1;
};

inline Child Spawn(const std::vector<std::string>& args) {
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
inline bool ReadLine(int fd, std::chrono::steady_clock::time_point deadline,
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

inline std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  return out;
}

// Waits for exit; returns the exit status, or -1 for a signal death.
inline int WaitExit(pid_t pid) {
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

struct Result {
  int exit_code;
  std::string output;
};

inline Result RunWorker(const std::vector<std::string>& args) {
  Child child = Spawn(args);
  std::string output = ReadAll(child.out_fd);
  close(child.out_fd);
  return {WaitExit(child.pid), output};
}

// A worker 1 of 2 on ckpt_A, started by Start and killed (if still
// running) by Kill, with a stub on it.
class ServedWorker {
 protected:
  // Call under ASSERT_NO_FATAL_FAILURE.
  // `default_host`: leave --host out (the worker's default address).
  void Start(const std::vector<std::string>& extra = {},
             bool default_host = false) {
    std::vector<std::string> args = {"--model=" + kCkptA, "--shard=1/2",
                                     "--port=0", "--mem=1G", "--threads=2"};
    if (!default_host) args.push_back("--host=127.0.0.1");
    args.insert(args.end(), extra.begin(), extra.end());
    child_ = Spawn(args);
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(60);
    std::string line;
    const std::string marker = "listening on 127.0.0.1:";
    while (ReadLine(child_.out_fd, deadline, &line)) {
      const size_t at = line.find(marker);
      if (at != std::string::npos) {
        listen_line_ = line;
        std::string digits = line.substr(at + marker.size());
        digits = digits.substr(0, digits.find_first_not_of("0123456789"));
        if (absl::SimpleAtoi(digits, &port_)) break;
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
  std::string listen_line_;  // "...: listening on HOST:PORT (TLS ...)"
  bool stopped_ = false;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<flotilla::v1::ExpertService::Stub> stub_;
};

}  // namespace flotilla::expert_worker::testutil

#endif  // FLOTILLA_EXPERT_WORKER_SERVED_WORKER_TESTUTIL_H_
