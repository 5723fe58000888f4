#include "shared/transport/cq_poll.h"

#include <grpc/support/time.h>
#include <sched.h>

namespace flotilla::transport {

bool NextWithSpin(grpc::CompletionQueue* cq, std::chrono::microseconds spin,
                  void** tag, bool* ok) {
  if (spin.count() > 0) {
    const auto until = std::chrono::steady_clock::now() + spin;
    do {
      // A deadline in the past: gRPC polls the queue's file descriptors
      // once (epoll with a zero timeout) and returns what is ready.
      switch (cq->AsyncNext(tag, ok, gpr_time_0(GPR_CLOCK_MONOTONIC))) {
        case grpc::CompletionQueue::GOT_EVENT:
          return true;
        case grpc::CompletionQueue::SHUTDOWN:
          return false;
        case grpc::CompletionQueue::TIMEOUT:
          break;
      }
      sched_yield();
    } while (std::chrono::steady_clock::now() < until);
  }
  return cq->Next(tag, ok);
}

}  // namespace flotilla::transport
