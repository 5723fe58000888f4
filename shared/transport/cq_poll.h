// Busy-polling a gRPC completion queue for a bounded time before sleeping.
//
// Why: on the VMs we run on, waking a thread that sleeps in epoll or on a
// futex costs ~100 us or more (a paravirtualized context switch), and an
// expert call at decode crosses such wake-ups on both sides. Plain loopback
// TCP with the sizes of a decode call, 5 ms of work per call and 1 ms
// between calls, measured 315-324 us per round trip with both ends blocking
// and 72-78 us with both ends polling (flotilla-bench-loopback,
// bench/distributed/README.md). Polling trades a CPU for it, so it is
// opt-in (--busy-poll-us) and bounded: after `spin` without an event the
// thread blocks as usual.
//
// Includes gRPC headers: only for the .cc files of services and clients.
#ifndef FLOTILLA_SHARED_TRANSPORT_CQ_POLL_H_
#define FLOTILLA_SHARED_TRANSPORT_CQ_POLL_H_

#include <grpcpp/completion_queue.h>

#include <chrono>

namespace flotilla::transport {

// The next event of `cq`, like CompletionQueue::Next: polls without sleeping
// for up to `spin` (yielding the CPU between polls, so runnable threads of
// this process, such as a worker's kernel threads, keep their share), then
// blocks. A zero or negative `spin` is plain Next. Returns false only when
// the queue is shut down and drained.
//
// The thread calling this must be the process's only gRPC poller for the
// spin to help: gRPC (epoll1) lets one thread at a time poll the sockets
// and hands that role to any thread waiting on a completion queue, such as
// those of callback or sync methods (expert-worker/polling_front_end.cc).
bool NextWithSpin(grpc::CompletionQueue* cq, std::chrono::microseconds spin,
                  void** tag, bool* ok);

// The same with a deadline: TIMEOUT when no event came by then.
// system_clock::time_point::max() is no deadline (NextWithSpin is that).
grpc::CompletionQueue::NextStatus NextWithSpinUntil(
    grpc::CompletionQueue* cq, std::chrono::microseconds spin,
    std::chrono::system_clock::time_point deadline, void** tag, bool* ok);

// The same, but when `spin` > 0 and `spin_from` is still ahead, first
// blocks until then: for an event due around a known time (a layer's
// answers, timed by the same layer's last step) that is further off than
// `spin` would poll. The poll then covers the event's arrival instead of
// running out long before it, and the CPU is free meanwhile. An event that
// comes earlier still ends the wait at once, paying the wake-up that a
// poll would have saved. The sleep may end up to base::kCoarseTimerSlack
// after `spin_from`, so callers aim that much early
// (base::SleepBeforePolling). With `spin_from` in the
// past this is NextWithSpinUntil.
grpc::CompletionQueue::NextStatus NextWithSpinFrom(
    grpc::CompletionQueue* cq, std::chrono::system_clock::time_point spin_from,
    std::chrono::microseconds spin,
    std::chrono::system_clock::time_point deadline, void** tag, bool* ok);

}  // namespace flotilla::transport

#endif  // FLOTILLA_SHARED_TRANSPORT_CQ_POLL_H_
