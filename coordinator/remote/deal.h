// Dealing a layer's distinct experts to the workers that hold them, so that
// the busiest worker gets as few as possible: the layer waits for its
// slowest disk, and each expert is one read. Plain C++ (no gRPC), so the
// rule is unit-tested on its own (deal_test.cc).
#ifndef FLOTILLA_COORDINATOR_REMOTE_DEAL_H_
#define FLOTILLA_COORDINATOR_REMOTE_DEAL_H_

#include <vector>

namespace flotilla::coordinator {

// Item i may go to any worker in candidates[i] (its live holders, preferred
// first). Returns the worker of each item, minimizing the largest number of
// items on one worker; among such deals, earlier candidates win.
// Deterministic. Total: an item with no candidate in [0, num_workers) gets
// -1 (the caller reports it as unserved), and out-of-range candidates are
// ignored.
std::vector<int> DealItems(const std::vector<std::vector<int>>& candidates,
                           int num_workers);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_REMOTE_DEAL_H_
