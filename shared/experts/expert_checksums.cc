#include "shared/experts/expert_checksums.h"

#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/io/checksum.h"
#include "shared/io/file.h"
#include "shared/model/json_util.h"
#include "shared/pack/expert_table.h"

namespace flotilla::experts {
namespace fs = std::filesystem;

absl::StatusOr<std::string> ComputeExpertChecksums(const ExpertIndex& index) {
  std::vector<io::File> files;
  for (const std::string& name : index.files()) {
    FLOTILLA_ASSIGN_OR_RETURN(io::File f,
                              io::File::Open(name, /*direct=*/false));
    files.push_back(std::move(f));
  }
  std::vector<pack::PackExpert> records;
  std::vector<char> run(index.max_run_bytes());
  for (const ExpertKey& key : index.Keys()) {
    const ExpertLocation& loc = *index.Find(key);
    FLOTILLA_RETURN_IF_ERROR(
        files[loc.file].ReadAt(loc.offset, loc.length, run.data()));
    pack::PackExpert e;
    e.layer = key.layer;
    e.expert = key.expert;
    e.file = static_cast<int>(loc.file);
    e.offset = loc.offset;
    e.length = loc.length;
    e.checksum = io::Checksum64(run.data(), loc.length);
    e.tensor_offsets = loc.tensor_offsets;
    records.push_back(e);
  }
  return pack::EncodeExpertTable(records);
}

absl::StatusOr<bool> ApplyExpertChecksums(const std::string& folder,
                                          ExpertIndex* index) {
  const std::string path = folder + "/" + kExpertChecksumsFile;
  std::error_code ec;
  if (!fs::exists(path, ec)) return false;
  FLOTILLA_ASSIGN_OR_RETURN(std::string bytes,
                            model::internal::ReadSmallFile(path));
  FLOTILLA_ASSIGN_OR_RETURN(std::vector<pack::PackExpert> records,
                            pack::DecodeExpertTable(bytes, path));
  if (records.size() != index->size()) {
    return absl::DataLossError(
        absl::StrCat(path, " lists ", records.size(),
                     " experts but the folder's "
                     "safetensors hold ",
                     index->size(), " (re-run flotilla-tool pack --workers)"));
  }
  for (const pack::PackExpert& e : records) {
    const ExpertLocation* loc = index->Find({e.layer, e.expert});
    if (loc == nullptr || loc->file != static_cast<uint32_t>(e.file) ||
        loc->offset != e.offset || loc->length != e.length) {
      return absl::DataLossError(
          absl::StrCat(path, ": layer ", e.layer, " expert ", e.expert,
                       " at offset ", e.offset, " (", e.length,
                       " bytes) is not where the folder's "
                       "safetensors have it",
                       loc == nullptr ? " (not there at all)" : "",
                       "; re-run flotilla-tool pack --workers"));
    }
    FLOTILLA_RETURN_IF_ERROR(
        index->SetChecksum({e.layer, e.expert}, e.checksum));
  }
  return true;
}

}  // namespace flotilla::experts
