#include "shared/transport/cq_poll.h"

#include <grpc/support/time.h>
#include <sched.h>

#include <algorithm>

namespace flotilla::transport {

namespace {

// Polls without sleeping until `until` (steady clock); TIMEOUT when
// nothing came.
grpc::CompletionQueue::NextStatus Spin(
    grpc::CompletionQueue* cq, std::chrono::steady_clock::time_point until,
    void** tag, bool* ok) {
  do {
    // A deadline in the past: gRPC polls the queue's file descriptors
    // once (epoll with a zero timeout) and returns what is ready.
    const grpc::CompletionQueue::NextStatus s =
        cq->AsyncNext(tag, ok, gpr_time_0(GPR_CLOCK_MONOTONIC));
    if (s != grpc::CompletionQueue::TIMEOUT) return s;
    sched_yield();
  } while (std::chrono::steady_clock::now() < until);
  return grpc::CompletionQueue::TIMEOUT;
}

}  // namespace

bool NextWithSpin(grpc::CompletionQueue* cq, std::chrono::microseconds spin,
                  void** tag, bool* ok) {
  return NextWithSpinUntil(cq, spin,
                           std::chrono::system_clock::time_point::max(), tag,
                           ok) == grpc::CompletionQueue::GOT_EVENT;
}

grpc::CompletionQueue::NextStatus NextWithSpinUntil(
    grpc::CompletionQueue* cq, std::chrono::microseconds spin,
    std::chrono::system_clock::time_point deadline, void** tag, bool* ok) {
  const bool forever = deadline == std::chrono::system_clock::time_point::max();
  if (spin.count() > 0) {
    if (!forever) {
      spin =
          std::min(spin, std::chrono::duration_cast<std::chrono::microseconds>(
                             deadline - std::chrono::system_clock::now()));
    }
    const grpc::CompletionQueue::NextStatus s =
        Spin(cq, std::chrono::steady_clock::now() + spin, tag, ok);
    if (s != grpc::CompletionQueue::TIMEOUT) return s;
  }
  if (forever) {
    return cq->Next(tag, ok) ? grpc::CompletionQueue::GOT_EVENT
                             : grpc::CompletionQueue::SHUTDOWN;
  }
  return cq->AsyncNext(tag, ok, deadline);
}

grpc::CompletionQueue::NextStatus NextWithSpinFrom(
    grpc::CompletionQueue* cq, std::chrono::system_clock::time_point spin_from,
    std::chrono::microseconds spin,
    std::chrono::system_clock::time_point deadline, void** tag, bool* ok) {
  if (spin.count() > 0 && spin_from > std::chrono::system_clock::now()) {
    const std::chrono::system_clock::time_point until =
        std::min(spin_from, deadline);
    const grpc::CompletionQueue::NextStatus s = cq->AsyncNext(tag, ok, until);
    if (s != grpc::CompletionQueue::TIMEOUT || until == deadline) return s;
  }
  return NextWithSpinUntil(cq, spin, deadline, tag, ok);
}

}  // namespace flotilla::transport
