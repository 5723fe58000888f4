// Placement: which expert workers hold which routed experts. A deterministic
// map (layer, expert) -> R distinct workers, the first being the expert's
// primary. Shared by the worker (what it serves), `flotilla-tool pack
// --workers` (what each worker's folder holds) and tests; the coordinator
// does not need it, it learns ownership from each worker's Info.
//
// The default rule, "rotate-v1", for N workers and R replicas:
//   primary(layer, e)   = (e + layer) mod N
//   replica j (1..R-1)  = (primary + 1 + (floor(e / N) + j - 1) mod (N - 1))
//                         mod N
// so each layer's experts are dealt round-robin over all N workers (a
// token's experts of one layer land on many disks at once), rotating by
// layer evens out the totals when N does not divide num_experts, and the
// replicas of one worker's experts are spread over all the others (when a
// worker dies its load is shared, not dumped on one neighbour). Offsets
// 1 + (q + j - 1) mod (N - 1) for j = 1..R-1 are distinct and non-zero, so
// the R workers of an expert are distinct whenever R <= N.
//
// A placement can also be written to / read from a JSON file holding the
// explicit map, so any hand-made placement (e.g. bigger boxes own more
// experts) works with the same worker and coordinator:
//   {"format": "flotilla-placement", "version": 1, "rule": "rotate-v1",
//    "workers": N, "replicas": R, "num_experts": E,
//    "layers": {"1": [[w, w', ...] per expert], ...},
//    "worker": K,                 // optional: the worker a folder is for
//    "source_fingerprint": "..."} // optional: checkpoint the folder is from
//
// Thread-compatibility: immutable after construction.
#ifndef FLOTILLA_SHARED_PLACEMENT_PLACEMENT_H_
#define FLOTILLA_SHARED_PLACEMENT_PLACEMENT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace flotilla::placement {

inline constexpr char kRotateRule[] = "rotate-v1";
// Refuse placement files describing absurd fleets rather than allocate.
inline constexpr int kMaxWorkers = 4096;
inline constexpr int kMaxExperts = 1 << 16;

class Placement {
 public:
  Placement() = default;

  // The rotate-v1 map over `moe_layers` (layer indices, any order, no
  // duplicates). InvalidArgument unless 1 <= replicas <= workers <=
  // kMaxWorkers and 1 <= num_experts <= kMaxExperts.
  static absl::StatusOr<Placement> Rotate(const std::vector<int>& moe_layers,
                                          int num_experts, int workers,
                                          int replicas);

  // Parses the JSON form; errors name `source` and the offending entry.
  static absl::StatusOr<Placement> FromJson(absl::string_view json,
                                            absl::string_view source);
  static absl::StatusOr<Placement> Load(const std::string& path);
  // The JSON form (explicit map, plus worker / fingerprint when set).
  std::string ToJson() const;

  int workers() const { return workers_; }
  int replicas() const { return replicas_; }
  int num_experts() const { return num_experts_; }
  const std::string& rule() const { return rule_; }
  // MoE layers the map covers, ascending.
  std::vector<int> layers() const;

  // Workers holding (layer, expert), primary first; null when the pair is
  // not in the map. Points at `replicas()` entries.
  const int32_t* Holders(int layer, int expert) const;
  bool Holds(int worker, int layer, int expert) const;
  // Experts of `layer` that `worker` holds, ascending.
  std::vector<uint32_t> Owned(int worker, int layer) const;
  // Number of (layer, expert) pairs `worker` holds.
  size_t OwnedCount(int worker) const;

  // Optional identity of a per-worker folder (see the header comment):
  // -1 / empty when not set.
  int worker() const { return worker_; }
  const std::string& source_fingerprint() const { return fingerprint_; }
  void set_worker(int worker) { worker_ = worker; }
  void set_source_fingerprint(std::string f) { fingerprint_ = std::move(f); }

 private:
  int workers_ = 0;
  int replicas_ = 0;
  int num_experts_ = 0;
  std::string rule_;
  // layer -> [num_experts * replicas] worker ids, expert-major.
  std::map<int, std::vector<int32_t>> holders_;
  int worker_ = -1;
  std::string fingerprint_;
};

}  // namespace flotilla::placement

#endif  // FLOTILLA_SHARED_PLACEMENT_PLACEMENT_H_
