// The vocabulary of routed experts shared by every part that reads or
// computes them (index, fetcher, executor, engine, the coordinator's
// backends and the worker): which expert, in which format and shape, where
// its bytes sit in its run, and one (row, expert, weight) assignment.
// Plain structs, no dependencies.
#ifndef FLOTILLA_SHARED_EXPERTS_EXPERT_TYPES_H_
#define FLOTILLA_SHARED_EXPERTS_EXPERT_TYPES_H_

#include <array>
#include <cstdint>

namespace flotilla::experts {

struct ExpertKey {
  int32_t layer = 0;
  int32_t expert = 0;

  friend bool operator==(const ExpertKey& a, const ExpertKey& b) {
    return a.layer == b.layer && a.expert == b.expert;
  }
  friend bool operator<(const ExpertKey& a, const ExpertKey& b) {
    return a.layer != b.layer ? a.layer < b.layer : a.expert < b.expert;
  }
  // A single integer for hash maps; layer and expert are non-negative.
  uint64_t Packed() const {
    return (static_cast<uint64_t>(static_cast<uint32_t>(layer)) << 32) |
           static_cast<uint32_t>(expert);
  }
};

// kFp8: FP8 e4m3 `weight` [rows][cols] with F32 `weight_scale_inv`
// [ceil(rows/128)][ceil(cols/128)] (DeepSeek-V3 / Kimi K2). kMxfp4Bias:
// MXFP4 plus an F32 `bias` [rows] per matrix (gpt-oss).
enum class ExpertFormat { kMxfp4, kF32, kBF16, kFp8, kMxfp4Bias };
const char* ExpertFormatName(ExpertFormat format);

// Logical shape of one expert matrix, applied as y = W x: W[rows][cols].
// For MXFP4 the packed tensor is [rows][cols/2] and the scales
// [rows][cols/32].
struct MatrixShape {
  uint64_t rows = 0;
  uint64_t cols = 0;
};

// Tensors an expert run can hold: three matrices of up to three parts.
inline constexpr int kMaxTensorSlots = 9;
using TensorOffsets = std::array<uint64_t, kMaxTensorSlots>;

// Indices into ExpertLocation::tensor_offsets for two-part formats (matrix
// w's part p is slot parts * w + p in general, ExpertCodec::parts).
enum TensorSlot : int {
  kW1Packed = 0,  // dense: w1
  kW1Scale = 1,   // dense: w2
  kW2Packed = 2,  // dense: w3
  kW2Scale = 3,
  kW3Packed = 4,
  kW3Scale = 5,
};

struct ExpertLocation {
  bool present = false;  // false for (layer, expert) pairs not in the index
  uint32_t file = 0;     // index into ExpertIndex::files()
  uint64_t offset = 0;   // absolute byte offset of the run in the file
  uint64_t length = 0;   // bytes in the run (> 0)
  // Tensor offsets relative to `offset`: matrix w's part p at slot
  // codec.parts * w + p (TensorSlot for two-part formats; dense: w1, w2,
  // w3), zeros after. Each tensor lies inside [0, length).
  TensorOffsets tensor_offsets{};
  bool has_checksum = false;
  uint64_t checksum = 0;  // XXH3-64 (io::Checksum64) of the run's bytes
};

// One routed (row, expert) pair of a layer: the unit every expert backend
// computes (the coordinator calls it ExpertTask).
struct ExpertAssignment {
  int32_t row = 0;     // row of z / out
  int32_t expert = 0;  // expert index within the layer
  float weight = 0;    // combine weight (after renormalisation and scaling)
};

}  // namespace flotilla::experts

#endif  // FLOTILLA_SHARED_EXPERTS_EXPERT_TYPES_H_
