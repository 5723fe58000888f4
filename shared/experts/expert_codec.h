// The expert formats, in one home: how each stores one expert matrix (its
// tensors, their sizes, the names they carry), which shapes it can hold,
// and how a matrix of it is multiplied. Everything that sizes, indexes,
// reads or computes routed experts asks the codec of the index's format
// instead of switching on it, so a new format (FP8 e4m3 with block scales
// comes with the DeepSeek-V3 family, MXFP4 with biases with gpt-oss) is one
// entry in expert_codec.cc.
#ifndef FLOTILLA_SHARED_EXPERTS_EXPERT_CODEC_H_
#define FLOTILLA_SHARED_EXPERTS_EXPERT_CODEC_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shared/experts/expert_types.h"
#include "shared/kernels/thread_pool.h"

namespace flotilla::experts {

struct ExpertCodec {
  ExpertFormat format = ExpertFormat::kMxfp4;
  const char* name = "";  // the pack manifest's expert_format
  // Tensors per matrix, in the order an expert run holds them: matrix w's
  // part p is ExpertLocation::tensor_offsets[parts * w + p].
  int parts = 1;
  const char* suffixes[3] = {"", "", ""};  // tensor name suffix of each part
  // Bytes of part `part` of a [rows][cols] matrix.
  uint64_t (*part_bytes)(int part, uint64_t rows, uint64_t cols) = nullptr;
  // InvalidArgument naming the problem unless [rows][cols] can be stored.
  absl::Status (*check_shape)(uint64_t rows, uint64_t cols) = nullptr;
  // y[n][rows] = W x[n][cols], W from its parts (`part[p]`). `scratch` holds
  // a copy when the kernels need an alignment the bytes do not have.
  void (*matmul)(const uint8_t* const* part, const MatrixShape& shape,
                 const float* x, size_t n, float* y, kernels::ThreadPool* pool,
                 std::vector<float>* scratch) = nullptr;

  // InvalidArgument naming the problem when a matrix's bytes hold values
  // the matmul must not meet (FP8's NaN codes, a scale that is not finite
  // and positive); null where every byte pattern is a value. Checked once
  // when a run enters the process's keeping (packed, or held in memory),
  // not per token.
  absl::Status (*check_values)(const uint8_t* const* part,
                               const MatrixShape& shape) = nullptr;

  uint64_t MatrixBytes(uint64_t rows, uint64_t cols) const;
};

// check_values over the three matrices of one run (`run` + each part's
// offset, in ExpertLocation::tensor_offsets order).
absl::Status CheckRunValues(const ExpertCodec& codec, const uint8_t* run,
                            const uint64_t* tensor_offsets,
                            const std::array<MatrixShape, 3>& shapes);

const ExpertCodec& CodecOf(ExpertFormat format);
// The codec named `name` (a manifest's expert_format); InvalidArgument
// naming `source` and the known names otherwise.
absl::StatusOr<const ExpertCodec*> CodecNamed(absl::string_view name,
                                              const std::string& source);

}  // namespace flotilla::experts

#endif  // FLOTILLA_SHARED_EXPERTS_EXPERT_CODEC_H_
