// ExpertIndex::FromPackManifest: experts located by a `flotilla-tool pack`
// manifest. Uses only the PackManifest fields (not its functions), so this
// library does not depend on how the manifest is parsed.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/experts/expert_codec.h"
#include "shared/experts/expert_index.h"
#include "shared/experts/index_builder.h"

namespace flotilla::experts {
namespace {

std::string JoinPath(const std::string& dir, const std::string& file) {
  if (file.empty() || file[0] == '/' || dir.empty()) return file;
  return dir.back() == '/' ? dir + file : dir + "/" + file;
}

}  // namespace

absl::StatusOr<ExpertIndex> ExpertIndex::FromPackManifest(
    const pack::PackManifest& manifest, const model::MoeSpec& config,
    const std::string& model_dir, const std::string& pack_dir,
    bool require_every_expert) {
  const std::string source = JoinPath(pack_dir, "manifest.json");
  if (!manifest.complete) {
    return absl::FailedPreconditionError(
        absl::StrCat(source,
                     " is incomplete (a pack is running or was interrupted); "
                     "finish it with `flotilla-tool pack`"));
  }
  FLOTILLA_ASSIGN_OR_RETURN(const ExpertCodec* codec,
                            CodecNamed(manifest.expert_format, source));
  const ExpertFormat format = codec->format;
  const uint64_t lat = config.hidden_size;
  const uint64_t inter = config.intermediate_size;
  const std::array<MatrixShape, 3> shapes = {MatrixShape{inter, lat},
                                             MatrixShape{lat, inter},
                                             MatrixShape{inter, lat}};
  // Byte size of each tensor in tensor_offsets order.
  TensorOffsets sizes{};
  int num_tensors = 0;
  for (int w = 0; w < 3; ++w) {
    for (int p = 0; p < codec->parts; ++p) {
      sizes[num_tensors++] =
          codec->part_bytes(p, shapes[w].rows, shapes[w].cols);
    }
  }
  const std::string& dir = manifest.experts_in_model_dir ? model_dir : pack_dir;
  IndexBuilder builder;
  for (size_t i = 0; i < manifest.experts.size(); ++i) {
    const pack::PackExpert& e = manifest.experts[i];
    const std::string what = absl::StrCat(source, " experts[", i, "] (layer ",
                                          e.layer, ", expert ", e.expert, ")");
    if (e.file < 0 ||
        static_cast<size_t>(e.file) >= manifest.expert_files.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": file index ", e.file, " outside expert_files (",
                       manifest.expert_files.size(), " entries)"));
    }
    if (e.length == 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": empty run"));
    }
    for (int t = 0; t < num_tensors; ++t) {
      if (e.tensor_offsets[t] > e.length ||
          sizes[t] > e.length - e.tensor_offsets[t]) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": tensor ", t, " at run offset ", e.tensor_offsets[t], " (",
            sizes[t], " bytes for the config's shapes) runs past the ",
            e.length, "-byte run"));
      }
    }
    ExpertLocation loc;
    loc.offset = e.offset;
    loc.length = e.length;
    loc.tensor_offsets = e.tensor_offsets;
    loc.has_checksum = true;
    loc.checksum = e.checksum;
    FLOTILLA_RETURN_IF_ERROR(
        builder.Add(ExpertKey{e.layer, e.expert},
                    JoinPath(dir, manifest.expert_files[e.file]), loc, format,
                    shapes, what));
  }
  return builder.Finish(require_every_expert ? &config : nullptr,
                        /*only_layer=*/-1, source);
}

}  // namespace flotilla::experts
