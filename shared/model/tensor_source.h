// Read access to named tensors, independent of the file format: safetensors
// checkpoints (one or many shards) and the flat float32 oracle format both
// implement it. Data is read on request, never whole files at once.
#ifndef FLOTILLA_SHARED_MODEL_TENSOR_SOURCE_H_
#define FLOTILLA_SHARED_MODEL_TENSOR_SOURCE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace flotilla::model {

// kF8E4M3: FP8 e4m3 bytes ("F8_E4M3"), dequantised with their block scales
// (shared/kernels/fp8.h), never read as float32 alone.
enum class DType { kF32, kBF16, kF16, kU8, kF8E4M3 };

const char* DTypeName(DType dtype);
size_t DTypeSize(DType dtype);

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::string file;     // path of the file holding the data
  uint64_t offset = 0;  // absolute byte offset of the data in `file`
  uint64_t nbytes = 0;  // = numel * DTypeSize(dtype), validated at open
  // A view's tensor (shared/family: gpt-oss's per-expert tensors cut from
  // fused ones): its bytes are reordered or widened from `file`, so they
  // come only from the ReadRaw of the source that listed it, never from
  // `file` at `offset`, and it cannot be streamed or served in place.
  bool derived = false;

  int64_t numel() const;
};

class TensorSource {
 public:
  virtual ~TensorSource() = default;

  // Null when the tensor does not exist.
  virtual const TensorInfo* Find(absl::string_view name) const = 0;

  // Every tensor name, sorted.
  virtual std::vector<std::string> Names() const = 0;

  // Calls fn for every tensor in name order without copying the names
  // first: a full K3 checkpoint has ~497,000, ~60 MB as Names(). This
  // default goes through Names(); SafetensorsCheckpoint walks its table.
  virtual void ForEachTensor(
      const std::function<void(const TensorInfo&)>& fn) const;

  // Reads the raw bytes of `info` into dst (info.nbytes long). Errors name
  // the file, tensor and offset.
  virtual absl::Status ReadRaw(const TensorInfo& info, void* dst) const = 0;

  // Reads bytes [begin, begin + n) of `info`'s raw bytes into dst. This
  // default reads the whole tensor; SafetensorsCheckpoint reads the range.
  // InvalidArgument when the range is outside the tensor.
  virtual absl::Status ReadRange(const TensorInfo& info, uint64_t begin,
                                 uint64_t n, void* dst) const;

  // Reads a tensor as float32, widening BF16/F16 exactly. Fails with a
  // message naming the tensor when it is missing, has an unsupported dtype,
  // or its element count differs from `expected_numel` (if >= 0).
  absl::StatusOr<std::vector<float>> ReadF32(absl::string_view name,
                                             int64_t expected_numel) const;
};

}  // namespace flotilla::model

#endif  // FLOTILLA_SHARED_MODEL_TENSOR_SOURCE_H_
