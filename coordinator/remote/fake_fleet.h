// A fleet of expert workers in memory, behind the WorkerTransport interface,
// for the unit tests of RemoteExperts' dealing, retries and combine. Expert
// e of layer l is the toy map y[j] = (e + 1) * x[j] + l, so answers are
// cheap and exact; a worker can be made to fail, to reject calls, or to
// answer with the wrong number of floats. Tests only.
#ifndef FLOTILLA_COORDINATOR_REMOTE_FAKE_FLEET_H_
#define FLOTILLA_COORDINATOR_REMOTE_FAKE_FLEET_H_

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/remote/worker_transport.h"
#include "shared/model/moe_spec.h"

namespace flotilla::coordinator::testing {

// What worker w does with the calls it gets.
enum class WorkerBehaviour {
  kAnswer,       // computes every call
  kDown,         // UNAVAILABLE (connection refused)
  kReject,       // INVALID_ARGUMENT
  kShortAnswer,  // OK, but one float short
  kCorrupt,      // DATA_LOSS, as a worker whose checksum check failed
};

// The toy expert: y[j] = (e + 1) * x[j] + layer.
inline float ToyExpert(int layer, int expert, float x) {
  return static_cast<float>(expert + 1) * x + static_cast<float>(layer);
}

class FakeFleet final : public WorkerTransport {
 public:
  // `owned[w]`: the (layer, expert) pairs worker w holds.
  FakeFleet(const model::MoeSpec& config, std::string fingerprint,
            std::vector<std::set<std::pair<int, int>>> owned);

  void SetBehaviour(int w, WorkerBehaviour b) { behaviour_[w] = b; }
  void SetMaxRequestBytes(uint64_t bytes) { max_request_bytes_ = bytes; }
  void SetFingerprint(int w, std::string f) { fingerprints_[w] = std::move(f); }

  // Every Compute answered so far, in arrival order.
  const std::vector<v1::ComputeRequest>& requests(int w) const {
    return requests_[w];
  }
  // Prefetch hints received, per worker: (layer, experts).
  const std::vector<v1::PrefetchRequest>& hints(int w) const {
    return hints_[w];
  }
  int calls(int w) const { return static_cast<int>(requests_[w].size()); }

  std::vector<absl::StatusOr<v1::InfoResponse>> InfoAll(
      int deadline_ms, bool wait_for_ready) override;
  absl::StatusOr<v1::InfoResponse> Info(int w, int deadline_ms) override;
  void StartCompute(ComputeCall* call, int deadline_ms) override;
  void AwaitComputes() override;
  void SendPrefetch(int w, const v1::PrefetchRequest& request,
                    int deadline_ms) override;
  PrefetchTally Prefetches() override { return tally_; }

 private:
  void Answer(ComputeCall* call);

  model::MoeSpec config_;
  std::vector<std::string> fingerprints_;
  std::vector<std::set<std::pair<int, int>>> owned_;
  // Atomic: the health thread's Info reads it beside the test's writes.
  std::unique_ptr<std::atomic<WorkerBehaviour>[]> behaviour_;
  uint64_t max_request_bytes_ = 64 << 20;
  std::vector<ComputeCall*> started_;
  std::vector<std::vector<v1::ComputeRequest>> requests_;
  std::vector<std::vector<v1::PrefetchRequest>> hints_;
  PrefetchTally tally_;
};

}  // namespace flotilla::coordinator::testing

#endif  // FLOTILLA_COORDINATOR_REMOTE_FAKE_FLEET_H_
