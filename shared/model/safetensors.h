// Safetensors checkpoints: a single file, or many shards listed by
// model.safetensors.index.json. Headers are parsed and validated at open
// (data_offsets within the file, byte counts matching dtype x shape, no
// overlaps); tensor data is read on demand with pread, so a 1.5 TB
// checkpoint opens in the time it takes to read its headers.
#ifndef FLOTILLA_SHARED_MODEL_SAFETENSORS_H_
#define FLOTILLA_SHARED_MODEL_SAFETENSORS_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "shared/model/tensor_source.h"

namespace flotilla::io {
class File;
}  // namespace flotilla::io

namespace flotilla::model {

class SafetensorsCheckpoint : public TensorSource {
 public:
  // Opens one .safetensors file.
  static absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> OpenFile(
      const std::string& path);

  // Opens a model directory: model.safetensors.index.json when present
  // (every shard it names must exist and hold the tensors it maps), else
  // every *.safetensors file in the directory.
  static absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> OpenDir(
      const std::string& dir);

  const TensorInfo* Find(absl::string_view name) const override;
  std::vector<std::string> Names() const override;
  void ForEachTensor(
      const std::function<void(const TensorInfo&)>& fn) const override;
  absl::Status ReadRaw(const TensorInfo& info, void* dst) const override;
  absl::Status ReadRange(const TensorInfo& info, uint64_t begin, uint64_t n,
                         void* dst) const override;

 private:
  SafetensorsCheckpoint() = default;
  // Parses `path`'s header and adds its tensors; a name already present
  // (from another shard) is an error. Returns the names added.
  absl::StatusOr<std::vector<std::string>> AddShard(const std::string& path);
  absl::Status LoadIndex(const std::string& dir, const std::string& index);

  // Ordered by name, each name stored once (in the TensorInfo): the real
  // Kimi K3 has ~497,000 tensors.
  struct ByName {
    using is_transparent = void;
    bool operator()(const TensorInfo& a, const TensorInfo& b) const {
      return a.name < b.name;
    }
    bool operator()(const TensorInfo& a, absl::string_view b) const {
      return a.name < b;
    }
    bool operator()(absl::string_view a, const TensorInfo& b) const {
      return a < b.name;
    }
  };
  std::set<TensorInfo, ByName> tensors_;
  // One open descriptor per shard, keyed by TensorInfo::file. Shared so
  // that concurrent ReadRaw calls need no lock (pread has no file offset).
  std::map<std::string, std::shared_ptr<const io::File>, std::less<>> files_;
};

}  // namespace flotilla::model

#endif  // FLOTILLA_SHARED_MODEL_SAFETENSORS_H_
