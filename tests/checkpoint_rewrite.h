// Rewrites a safetensors checkpoint into another folder, tensor by tensor:
// into several shards (with a model.safetensors.index.json), with tensors
// dropped, renamed or given another shape, for tests of how a checkpoint is
// split or broken. config.json is copied (or replaced).
#ifndef FLOTILLA_TESTS_CHECKPOINT_REWRITE_H_
#define FLOTILLA_TESTS_CHECKPOINT_REWRITE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "shared/model/tensor_source.h"

namespace flotilla::testutil {

// What becomes of one tensor: the shard it goes to (-1 drops it), and the
// shape it is written with (its bytes unchanged, so the element count must
// stay the same, or `bytes` replaced).
struct TensorFate {
  int shard = 0;
  std::vector<int64_t> shape;
  model::DType dtype = model::DType::kF32;
  std::vector<uint8_t> bytes;  // the tensor's stored bytes
};

struct RewriteOptions {
  int shards = 1;
  // Called for every tensor with its fate filled in as read (shard 0); may
  // change it.
  std::function<void(const model::TensorInfo& info, TensorFate* fate)> edit;
  std::string config_json;  // replaces config.json when non-empty
};

absl::Status RewriteCheckpoint(const std::string& from, const std::string& to,
                               const RewriteOptions& options);

}  // namespace flotilla::testutil

#endif  // FLOTILLA_TESTS_CHECKPOINT_REWRITE_H_
