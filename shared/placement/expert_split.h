// ExpertSplit: the "split" placement, where every expert is cut by matrix
// rows into N slices and expert worker k holds slice k of EVERY routed
// expert (`flotilla-tool pack --workers N --split`). Whole-expert placement
// with R = 1 leaves one worker with the most of a token's experts
// (balls in bins: 2 workers read about 5 of 8); slices give each worker
// exactly 1/N of every layer's bytes, whatever the routing.
//
// Slice k of an expert with intermediate size I and latent width L:
//   w1, w3 rows [inter_begin(k), inter_end(k))   (gate / up outputs)
//   w2     rows [latent_begin(k), latent_end(k)) (down-projection outputs)
// with begin(k) = floor(k * size / N), so the slices tile [0, size) in
// order. Every output element is still one whole dot product computed by
// one worker with the kernels' fixed reduction order, so the assembled
// expert output is bitwise identical to the single-process one: a layer
// takes two round trips (gate/up slices, then the down projection of the
// assembled activations), never a cross-worker partial sum.
//
// File form (split.json in each worker folder):
//   {"format": "flotilla-split", "version": 1, "workers": N, "worker": K,
//    "intermediate": I, "latent": L, "source_fingerprint": "..."}
//
// Thread-compatibility: a value type; const methods are thread-safe.
#ifndef FLOTILLA_SHARED_PLACEMENT_EXPERT_SPLIT_H_
#define FLOTILLA_SHARED_PLACEMENT_EXPERT_SPLIT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace flotilla::placement {

// File name of the split record inside a worker folder.
inline constexpr char kSplitFile[] = "split.json";

// A half-open row range [begin, end).
struct RowRange {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t size() const { return end - begin; }
  friend bool operator==(const RowRange& a, const RowRange& b) {
    return a.begin == b.begin && a.end == b.end;
  }
};

// The slice of `size` rows that worker k of n holds: [k*size/n,
// (k+1)*size/n). Requires 0 <= k < n.
RowRange SliceRows(uint64_t size, int k, int n);

struct ExpertSplit {
  int workers = 1;                 // N >= 1
  int worker = 0;                  // K in [0, N)
  uint64_t intermediate = 0;       // I (moe_intermediate_size), >= N
  uint64_t latent = 0;             // L (routed_expert_hidden_size), >= N
  std::string source_fingerprint;  // checkpoint the slices were cut from

  RowRange inter_rows() const {
    return SliceRows(intermediate, worker, workers);
  }
  RowRange latent_rows() const { return SliceRows(latent, worker, workers); }

  // InvalidArgument unless 1 <= workers <= kMaxWorkers, 0 <= worker <
  // workers, intermediate >= workers and latent >= workers (no empty
  // slice).
  absl::Status Validate() const;
  std::string ToJson() const;
  // Parses and validates; errors name `source` and the offending field.
  static absl::StatusOr<ExpertSplit> FromJson(absl::string_view json,
                                              absl::string_view source);
  static absl::StatusOr<ExpertSplit> Load(const std::string& path);
};

}  // namespace flotilla::placement

#endif  // FLOTILLA_SHARED_PLACEMENT_EXPERT_SPLIT_H_
