#include "tests/checkpoint_rewrite.h"

#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "shared/base/status_macros.h"
#include "shared/model/safetensors.h"
#include "shared/model/safetensors_writer.h"

namespace flotilla::testutil {

absl::Status RewriteCheckpoint(const std::string& from, const std::string& to,
                               const RewriteOptions& o) {
  namespace fs = std::filesystem;
  FLOTILLA_ASSIGN_OR_RETURN(auto source,
                            model::SafetensorsCheckpoint::OpenDir(from));
  std::vector<std::vector<TensorFate>> fates(o.shards);
  std::vector<std::vector<std::string>> names(o.shards);
  for (const std::string& name : source->Names()) {
    const model::TensorInfo* t = source->Find(name);
    TensorFate f;
    f.shape = t->shape;
    f.dtype = t->dtype;
    f.bytes.resize(t->nbytes);
    FLOTILLA_RETURN_IF_ERROR(source->ReadRaw(*t, f.bytes.data()));
    if (o.edit) o.edit(*t, &f);
    if (f.shard < 0) continue;
    if (f.shard >= o.shards) {
      return absl::InvalidArgumentError(absl::StrCat("no shard ", f.shard));
    }
    names[f.shard].push_back(name);
    fates[f.shard].push_back(std::move(f));
  }
  std::error_code ec;
  fs::create_directories(to, ec);
  model::SafetensorsWriterOptions wo;
  wo.direct_io = false;
  wo.buffer_bytes = size_t{1} << 20;
  FLOTILLA_ASSIGN_OR_RETURN(auto writer, model::SafetensorsWriter::Create(wo));
  nlohmann::json index = {{"metadata", nlohmann::json::object()},
                          {"weight_map", nlohmann::json::object()}};
  for (int s = 0; s < o.shards; ++s) {
    const std::string file =
        absl::StrCat("model-", s + 1, "-of-", o.shards, ".safetensors");
    std::vector<model::TensorToWrite> tensors;
    for (size_t i = 0; i < fates[s].size(); ++i) {
      const TensorFate* f = &fates[s][i];
      tensors.push_back(model::TensorToWrite{
          names[s][i], f->dtype, f->shape,
          [f](uint64_t offset, uint64_t size, uint8_t* dst) {
            std::copy(f->bytes.begin() + offset,
                      f->bytes.begin() + offset + size, dst);
          }});
      index["weight_map"][names[s][i]] = file;
    }
    FLOTILLA_RETURN_IF_ERROR(writer->WriteShard(to + "/" + file, tensors));
  }
  std::ofstream(to + "/model.safetensors.index.json") << index.dump();
  if (o.config_json.empty()) {
    fs::copy_file(from + "/config.json", to + "/config.json",
                  fs::copy_options::overwrite_existing, ec);
    if (ec) return absl::InternalError(ec.message());
  } else {
    std::ofstream(to + "/config.json") << o.config_json;
  }
  return absl::OkStatus();
}

}  // namespace flotilla::testutil
