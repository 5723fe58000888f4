// model.safetensors.index.json read without a DOM. The real Kimi K3 index
// is ~58 MB and maps ~497,000 tensors; parsed into a JSON tree it took
// several hundred MB for the length of the open (and glibc kept most of
// it), so the weight_map is read with nlohmann's SAX interface straight
// into the shard -> names lists the checkpoint needs.
#ifndef FLOTILLA_SHARED_MODEL_SAFETENSORS_INDEX_H_
#define FLOTILLA_SHARED_MODEL_SAFETENSORS_INDEX_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::model::internal {

// Shard file name -> the tensor names the index places there, in index
// order. InvalidArgument naming `index_path` for: invalid JSON (with the
// parser's reason and byte), a top level that is not an object, no
// `weight_map` object, an empty one, an entry whose value is not a string,
// or a shard name that is absolute or reaches outside the directory.
absl::StatusOr<std::map<std::string, std::vector<std::string>>>
ReadIndexWeightMap(const std::string& index_path);

}  // namespace flotilla::model::internal

#endif  // FLOTILLA_SHARED_MODEL_SAFETENSORS_INDEX_H_
