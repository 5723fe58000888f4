// Parsing and validation of one safetensors file's header. Kept apart from
// the checkpoint class so the byte-level rules (and their error messages)
// can be read in one place.
#ifndef FLOTILLA_SHARED_MODEL_SAFETENSORS_HEADER_H_
#define FLOTILLA_SHARED_MODEL_SAFETENSORS_HEADER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/io/file.h"
#include "shared/model/tensor_source.h"

namespace flotilla::model::internal {

// safetensors' own limit; real K3 shard headers are about 1 MB.
inline constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;

// Reads the 8-byte length and JSON header of `file` and returns every
// tensor (not __metadata__) with absolute data offsets, in file order.
// Rejects: a header length past the end of the file or above
// kMaxHeaderBytes, malformed JSON, entries missing dtype / shape /
// data_offsets or with wrong types, unsupported dtypes, negative or
// overflowing shapes, byte counts that differ from numel x element size,
// data past the end of the file (a truncated shard), and overlapping
// tensors. Every message names the file, and the tensor where there is one.
absl::StatusOr<std::vector<TensorInfo>> ReadSafetensorsHeader(
    const io::File& file);

}  // namespace flotilla::model::internal

#endif  // FLOTILLA_SHARED_MODEL_SAFETENSORS_HEADER_H_
