// flotilla-bench-grpc-pingpong: what gRPC itself adds to a round trip, with
// the message sizes of a k3-bench decode call (8 KiB request, 32 KiB
// response) and nothing else: a forked server process answers on one
// thread that polls its completion queue, as the busy-polling worker does,
// and the client polls its own, as the busy-polling coordinator does. The
// server holds each request for --work-us, the client waits --gap-us
// between calls. Two ways to carry a call:
//   --mode=unary   one unary RPC per call, as Compute is today;
//   --mode=stream  one message each way on a bidirectional stream opened
//                  once, which skips gRPC's per-call set-up on both sides.
// Prints the median round trip minus --work-us, and of its two legs (the
// request's, client send to server handler; the answer's, server write to
// client completion), as JSON. Compare with
// flotilla-bench-loopback (plain TCP) for the floor under both.
//
// usage: flotilla-bench-grpc-pingpong [--mode=unary|stream] [--work-us=5000]
//            [--gap-us=1000] [--calls=300] [--spin-us=100000] [--touch-mb=0]
//            [--touch-elsewhere] [--touch-nta] [--request-kb=8]
//            [--response-kb=32] [--grpc-arg=NAME=INT ...]
#include <grpcpp/generic/generic_stub.h>
#include <immintrin.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/distributed/int_flag.h"
#include "shared/transport/cq_poll.h"
#include "shared/transport/polled_standard_services.h"
#include "shared/transport/transport.h"

namespace {

namespace tr = flotilla::transport;
using Clock = std::chrono::steady_clock;
// Message sizes (--request-kb, --response-kb); the defaults are a k3-bench
// decode call's. A K3 decode answer of 16 experts is 224 KiB.
size_t g_request_bytes = 8192, g_response_bytes = 32768;
constexpr char kUnary[] = "/flotilla.bench.PingPong/Unary";
constexpr char kStream[] = "/flotilla.bench.PingPong/Stream";

// --touch-mb: the work and the gap stream through this much memory first,
// as expert and attention kernels stream their weights, so that gRPC finds
// its state out of the caches as it does between real calls. With
// --touch-elsewhere another thread does it while this one spins, as if the
// kernels ran on other cores: what is left is the shared cache's share.
std::vector<char>* g_touch = nullptr;
bool g_touch_elsewhere = false;
// --touch-nta: the streaming reads are preceded by PREFETCHNTA, as a kernel
// that marks its weights non-temporal would read them.
bool g_touch_nta = false;

void Touch() {
  volatile char sink = 0;
  const char* data = g_touch->data();
  const size_t n = g_touch->size();
  if (g_touch_nta) {
    for (size_t i = 0; i < n; i += 64) {
      if (i + 2048 < n) _mm_prefetch(data + i + 2048, _MM_HINT_NTA);
      sink = sink + data[i];
    }
    return;
  }
  for (size_t i = 0; i < n; i += 64) sink = sink + data[i];
}

void Spin(int us) {
  const auto end = Clock::now() + std::chrono::microseconds(us);
  std::thread elsewhere;
  if (g_touch != nullptr && g_touch_elsewhere) {
    elsewhere = std::thread(Touch);
  } else if (g_touch != nullptr) {
    Touch();
  }
  while (Clock::now() < end) {
  }
  if (elsewhere.joinable()) elsewhere.join();
}

int64_t Now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             Clock::now().time_since_epoch())
      .count();
}

grpc::ByteBuffer Bytes(size_t n) {
  grpc::Slice slice(std::string(n, 'x'));
  return grpc::ByteBuffer(&slice, 1);
}

// One call on the server, from arrival to its end: unary (read, answer
// with WriteAndFinish) or stream (read, write, read, ... until the client
// closes, then finish).
class ServerCall final : public tr::PolledOp {
 public:
  ServerCall(grpc::AsyncGenericService* service,
             grpc::ServerCompletionQueue* cq, int work_us)
      : service_(service), cq_(cq), work_us_(work_us), stream_(&context_) {
    service_->RequestCall(&context_, &stream_, cq_, cq_, this);
  }

  bool Proceed(bool ok) override {
    switch (step_) {
      case kArrive:
        if (!ok) return false;
        new ServerCall(service_, cq_, work_us_);
        unary_ = context_.method() == kUnary;
        step_ = kRead;
        stream_.Read(&in_, this);
        return true;
      case kRead:
        if (!ok) {
          step_ = kDone;
          stream_.Finish(grpc::Status::OK, this);
          return true;
        }
        {
          // The answer carries when the request arrived and when the
          // answer left (steady_clock, shared by both processes), for the
          // split of the overhead into its two legs.
          const int64_t arrived = Now();
          Spin(work_us_);
          std::string bytes(g_response_bytes, 'x');
          const int64_t leaving = Now();
          std::memcpy(bytes.data(), &arrived, sizeof(arrived));
          std::memcpy(bytes.data() + 8, &leaving, sizeof(leaving));
          grpc::Slice slice(std::move(bytes));
          out_ = grpc::ByteBuffer(&slice, 1);
        }
        if (unary_) {
          step_ = kDone;
          stream_.WriteAndFinish(out_, grpc::WriteOptions(), grpc::Status::OK,
                                 this);
        } else {
          step_ = kWrite;
          stream_.Write(out_, this);
        }
        return true;
      case kWrite:
        if (!ok) return false;
        step_ = kRead;
        stream_.Read(&in_, this);
        return true;
      case kDone:
        return false;
    }
    return false;
  }

 private:
  enum Step { kArrive, kRead, kWrite, kDone };
  grpc::AsyncGenericService* const service_;
  grpc::ServerCompletionQueue* const cq_;
  const int work_us_;
  grpc::GenericServerContext context_;
  grpc::GenericServerAsyncReaderWriter stream_;
  grpc::ByteBuffer in_, out_;
  Step step_ = kArrive;
  bool unary_ = false;
};

// The server process: tells the parent its port through `port_fd`.
int Serve(int port_fd, int work_us, std::chrono::microseconds spin,
          const std::vector<std::pair<std::string, int>>& grpc_args) {
  tr::PolledStandardServices standard({});
  std::unique_ptr<grpc::ServerCompletionQueue> cq;
  tr::ServerOptions options;
  options.host = "127.0.0.1";
  options.standard_services_on_queue = true;  // one poller, as the worker
  options.generic_service = standard.generic_service();
  options.async_queue = &cq;
  options.int_args = grpc_args;
  int port = 0;
  auto server = tr::StartServer(options, &port);
  if (!server.ok()) return 1;
  // The standard services take no calls here: every call is ours.
  new ServerCall(standard.generic_service(), cq.get(), work_us);
  if (write(port_fd, &port, sizeof(port)) != sizeof(port)) return 1;
  close(port_fd);
  void* tag = nullptr;
  bool ok = false;
  while (tr::NextWithSpin(cq.get(), spin, &tag, &ok)) {
    auto* op = static_cast<tr::PolledOp*>(tag);
    if (!op->Proceed(ok)) delete op;
  }
  return 0;
}

int Usage(const std::string& why) {
  std::fprintf(stderr,
               "flotilla-bench-grpc-pingpong: %s\nusage: "
               "flotilla-bench-grpc-pingpong [--mode=unary|stream] "
               "[--work-us=N] [--gap-us=N] [--calls=N] [--spin-us=N] "
               "[--touch-mb=N] [--touch-elsewhere] [--touch-nta] "
               "[--request-kb=N] [--response-kb=N] "
               "[--grpc-arg=NAME=INT ...]\n",
               why.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int work_us = 5000, gap_us = 1000, calls = 300, spin_us = 100000,
      touch_mb = 0, request_kb = 8, response_kb = 32;
  std::string mode = "unary";
  // --grpc-arg=NAME=INT (repeatable): a channel argument for both ends,
  // e.g. grpc.http2.max_frame_size=1048576.
  std::vector<std::pair<std::string, int>> grpc_args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--grpc-arg=", 0) == 0) {
      const std::string spec = arg.substr(11);
      const size_t eq = spec.rfind('=');
      int v = 0;
      if (eq == std::string::npos || eq == 0 ||
          !absl::SimpleAtoi(spec.substr(eq + 1), &v)) {
        return Usage("--grpc-arg needs NAME=INTEGER, not " + spec);
      }
      grpc_args.emplace_back(spec.substr(0, eq), v);
      continue;
    }
    auto value = [&](const char* name, int* out) {
      return flotilla::bench::ParseIntFlag(arg, name, out);
    };
    if (arg == "--touch-elsewhere") {
      g_touch_elsewhere = true;
    } else if (arg == "--touch-nta") {
      g_touch_nta = true;
    } else if (arg.rfind("--mode=", 0) == 0) {
      mode = arg.substr(7);
    } else if (!value("work-us", &work_us) && !value("gap-us", &gap_us) &&
               !value("calls", &calls) && !value("spin-us", &spin_us) &&
               !value("touch-mb", &touch_mb) &&
               !value("request-kb", &request_kb) &&
               !value("response-kb", &response_kb)) {
      return Usage("unknown argument " + arg);
    }
  }
  for (const auto& [name, v] : {std::pair<const char*, int>{"work-us", work_us},
                                {"gap-us", gap_us},
                                {"calls", calls},
                                {"spin-us", spin_us},
                                {"touch-mb", touch_mb},
                                {"request-kb", request_kb},
                                {"response-kb", response_kb}}) {
    if (v < 0)
      return Usage(absl::StrCat("--", name, " must be an integer >= 0"));
  }
  if (calls < 1) return Usage("--calls must be at least 1");
  if (response_kb < 1 || response_kb > 65536 || request_kb > 65536) {
    return Usage("--response-kb must be in [1, 65536], --request-kb <= 65536");
  }
  g_request_bytes = static_cast<size_t>(request_kb) << 10;
  g_response_bytes = static_cast<size_t>(response_kb) << 10;
  if (mode != "unary" && mode != "stream") {
    return Usage("--mode must be unary or stream, not " + mode);
  }
  const std::chrono::microseconds spin(spin_us);
  std::vector<char> touch(static_cast<size_t>(touch_mb) << 20, 1);
  if (touch_mb > 0) g_touch = &touch;

  int fds[2];
  if (pipe(fds) != 0) return 1;
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    _exit(Serve(fds[1], work_us, spin, grpc_args));
  }
  close(fds[1]);
  int port = 0;
  if (read(fds[0], &port, sizeof(port)) != sizeof(port) || port <= 0) {
    std::fprintf(stderr, "flotilla-bench-grpc-pingpong: no server\n");
    return 1;
  }
  grpc::ChannelArguments channel_args;
  for (const auto& [name, v] : grpc_args) channel_args.SetInt(name, v);
  auto channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                           grpc::InsecureChannelCredentials(),
                                           channel_args);
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  auto wait = [&](int events) {
    for (int i = 0; i < events; ++i) {
      void* tag = nullptr;
      bool ok = false;
      if (!tr::NextWithSpin(&cq, spin, &tag, &ok) || !ok) return false;
    }
    return true;
  };
  const grpc::ByteBuffer request = Bytes(g_request_bytes);
  grpc::ClientContext stream_context;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> stream;
  // Deadlines, so that a server that stops answering ends the run.
  const auto run_deadline =
      std::chrono::system_clock::now() + std::chrono::seconds(10) +
      std::chrono::microseconds(int64_t{calls + 20} * (work_us + gap_us));
  if (mode == "stream") {
    stream_context.set_deadline(run_deadline);
    stream = stub.PrepareCall(&stream_context, kStream, &cq);
    stream->StartCall(reinterpret_cast<void*>(1));
    if (!wait(1)) return 1;
  }
  std::vector<double> overhead_us, request_leg_us, response_leg_us;
  constexpr int kWarmup = 20;
  for (int i = 0; i < calls + kWarmup; ++i) {
    grpc::ByteBuffer response;
    const auto start = Clock::now();
    bool ok;
    if (stream != nullptr) {
      stream->Write(request, reinterpret_cast<void*>(2));
      stream->Read(&response, reinterpret_cast<void*>(3));
      ok = wait(2);
    } else {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(10) +
                           std::chrono::microseconds(work_us));
      grpc::Status status;
      auto call = stub.PrepareUnaryCall(&context, kUnary, request, &cq);
      call->StartCall();
      call->Finish(&response, &status, reinterpret_cast<void*>(4));
      ok = wait(1) && status.ok();
    }
    if (!ok || response.Length() != g_response_bytes) {
      std::fprintf(stderr, "flotilla-bench-grpc-pingpong: call %d failed\n", i);
      kill(child, SIGKILL);
      return 1;
    }
    const int64_t received = Now();
    const double us =
        std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    std::vector<grpc::Slice> slices;
    std::string head;
    if (response.Dump(&slices).ok()) {
      for (const grpc::Slice& s : slices) {
        head.append(reinterpret_cast<const char*>(s.begin()), s.size());
        if (head.size() >= 16) break;
      }
    }
    int64_t arrived = 0, leaving = 0;
    std::memcpy(&arrived, head.data(), sizeof(arrived));
    std::memcpy(&leaving, head.data() + 8, sizeof(leaving));
    if (i >= kWarmup) {
      overhead_us.push_back(us - work_us);
      const int64_t sent = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               start.time_since_epoch())
                               .count();
      request_leg_us.push_back((arrived - sent) / 1e3);
      response_leg_us.push_back((received - leaving) / 1e3);
    }
    Spin(gap_us);
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  auto median = [](std::vector<double>* v) {
    std::sort(v->begin(), v->end());
    return (*v)[v->size() / 2];
  };
  const double p50 = median(&overhead_us);
  std::string args_text;
  for (const auto& [name, v] : grpc_args) {
    absl::StrAppend(&args_text, args_text.empty() ? "" : ",", name, "=", v);
  }
  std::printf(
      "{\"mode\":\"%s\",\"work_us\":%d,\"gap_us\":%d,\"calls\":%d,"
      "\"spin_us\":%d,\"touch_mb\":%d,\"touch_elsewhere\":%s,"
      "\"touch_nta\":%s,\"request_kb\":%d,\"response_kb\":%d,"
      "\"grpc_args\":\"%s\","
      "\"round_trip_minus_work_us_p50\":%.1f,\"p90\":%.1f,"
      "\"request_leg_us_p50\":%.1f,\"response_leg_us_p50\":%.1f}\n",
      mode.c_str(), work_us, gap_us, calls, spin_us, touch_mb,
      g_touch_elsewhere ? "true" : "false", g_touch_nta ? "true" : "false",
      request_kb, response_kb, args_text.c_str(), p50,
      overhead_us[overhead_us.size() * 9 / 10], median(&request_leg_us),
      median(&response_leg_us));
  std::fflush(stdout);
  _exit(0);  // the open stream and channel need no orderly teardown
}
