// flotilla-bench-loopback: what a thread wake-up costs on this machine, the
// floor under any RPC. Two threads play ping-pong over loopback TCP with
// the message sizes of a k3-bench decode call (8 KiB request, 32 KiB
// response); the server side holds each request for --work-us (the expert
// compute) and the client waits --gap-us between calls (attention). Both
// ends either block in recv (the kernel wakes them) or poll it without
// sleeping. Prints the median round trip minus --work-us, as JSON.
//
// usage: flotilla-bench-loopback [--work-us=5000] [--gap-us=1000]
//                                [--calls=300] [--poll]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench/distributed/int_flag.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kRequestBytes = 8192;
constexpr size_t kResponseBytes = 32768;

// Busy for `us` microseconds without touching memory or sleeping.
void Spin(int us) {
  const auto end = Clock::now() + std::chrono::microseconds(us);
  while (Clock::now() < end) {
  }
}

// Reads exactly n bytes; false on EOF or error.
bool RecvAll(int fd, char* buf, size_t n, bool poll) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = recv(fd, buf + got, n - got, poll ? MSG_DONTWAIT : 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
      return false;
    }
  }
  return true;
}

bool SendAll(int fd, const char* buf, size_t n) {
  size_t sent = 0;
  while (sent < n) {
    const ssize_t w = send(fd, buf + sent, n - sent, MSG_NOSIGNAL);
    if (w < 0 && errno != EINTR) return false;
    if (w > 0) sent += static_cast<size_t>(w);
  }
  return true;
}

void NoDelay(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int Usage(const char* why) {
  std::fprintf(stderr,
               "flotilla-bench-loopback: %s\nusage: flotilla-bench-loopback "
               "[--work-us=N] [--gap-us=N] [--calls=N] [--poll]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int work_us = 5000, gap_us = 1000, calls = 300;
  bool poll = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* name, int* out) {
      return flotilla::bench::ParseIntFlag(arg, name, out);
    };
    if (arg == "--poll") {
      poll = true;
    } else if (!value("work-us", &work_us) && !value("gap-us", &gap_us) &&
               !value("calls", &calls)) {
      return Usage(("unknown argument " + arg).c_str());
    }
  }
  if (work_us < 0) return Usage("--work-us must be an integer >= 0");
  if (gap_us < 0) return Usage("--gap-us must be an integer >= 0");
  if (calls < 1) return Usage("--calls must be an integer >= 1");

  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (listener < 0 ||
      bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::perror("flotilla-bench-loopback: listen");
    return 1;
  }
  std::thread server([&] {
    const int fd = accept(listener, nullptr, nullptr);
    if (fd < 0) return;
    NoDelay(fd);
    std::vector<char> buf(kResponseBytes);
    while (RecvAll(fd, buf.data(), kRequestBytes, poll)) {
      Spin(work_us);
      if (!SendAll(fd, buf.data(), kResponseBytes)) break;
    }
    close(fd);
  });
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::perror("flotilla-bench-loopback: connect");
    return 1;
  }
  NoDelay(fd);
  std::vector<char> buf(kResponseBytes, 'x');
  std::vector<double> overhead_us;
  constexpr int kWarmup = 20;
  for (int i = 0; i < calls + kWarmup; ++i) {
    const auto start = Clock::now();
    if (!SendAll(fd, buf.data(), kRequestBytes) ||
        !RecvAll(fd, buf.data(), kResponseBytes, poll)) {
      std::fprintf(stderr, "flotilla-bench-loopback: connection lost\n");
      return 1;
    }
    const double us =
        std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    if (i >= kWarmup) overhead_us.push_back(us - work_us);
    Spin(gap_us);
  }
  shutdown(fd, SHUT_WR);  // the server's recv sees EOF and returns
  server.join();
  close(fd);
  close(listener);
  std::sort(overhead_us.begin(), overhead_us.end());
  std::printf(
      "{\"work_us\":%d,\"gap_us\":%d,\"calls\":%d,\"poll\":%s,"
      "\"round_trip_minus_work_us_p50\":%.1f,\"p90\":%.1f}\n",
      work_us, gap_us, calls, poll ? "true" : "false",
      overhead_us[overhead_us.size() / 2],
      overhead_us[overhead_us.size() * 9 / 10]);
  return 0;
}
