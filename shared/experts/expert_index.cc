#include "shared/experts/expert_index.h"

#include <algorithm>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "shared/base/status_macros.h"
#include "shared/experts/expert_codec.h"
#include "shared/experts/expert_tensors.h"
#include "shared/experts/index_builder.h"
#include "shared/io/aligned_buffer.h"
#include "shared/model/tensor_names.h"

namespace flotilla::experts {
namespace {

using model::DType;
using model::TensorInfo;

using Part = ExpertTensorPart;
constexpr Part kPacked = kPackedPart;

std::string Where(const TensorInfo* t) {
  return absl::StrCat("tensor ", t->name, " in ", t->file);
}

struct ParsedName {
  model::ExpertNaming naming;
  ExpertKey key;
  int which = 0;  // 0, 1, 2 for w1, w2, w3
  Part part = kPacked;
};

// A routed expert matrix's tensor (model::ParseExpertTensorName) whose
// suffix is one of the parts the index knows.
bool ParseExpertName(absl::string_view name, ParsedName* out) {
  model::ExpertTensorName n;
  if (!model::ParseExpertTensorName(name, &n) || n.which < 0) return false;
  for (int p = 0; p < kExpertTensorParts; ++p) {
    if (n.suffix == kExpertPartSuffix[p]) {
      out->naming = std::move(n.naming);
      out->key.layer = n.layer;
      out->key.expert = n.expert;
      out->which = n.which;
      out->part = static_cast<Part>(p);
      return true;
    }
  }
  return false;
}

// Checks that `parts` share one file and form one run (allowing fewer than
// `max_gap` unused bytes); fills the run fields of `loc`.
absl::Status BindRun(const ExpertKey& key,
                     const std::vector<const TensorInfo*>& parts,
                     uint64_t max_gap, ExpertLocation* loc, bool* has_gap) {
  std::vector<const TensorInfo*> sorted = parts;
  std::sort(sorted.begin(), sorted.end(),
            [](const TensorInfo* a, const TensorInfo* b) {
              return a->offset < b->offset;
            });
  uint64_t end = 0, used = 0;
  if (parts[0]->file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor ", parts[0]->name,
        " has no backing file (in-memory source): it cannot be streamed"));
  }
  for (size_t i = 0; i < sorted.size(); ++i) {
    const TensorInfo* t = sorted[i];
    if (t->file != parts[0]->file) {
      return absl::InvalidArgumentError(absl::StrCat(
          Where(t), " is not in ", parts[0]->file, " with ", parts[0]->name,
          ": an expert must be one run in one file (run `flotilla-tool pack` "
          "to write packed expert files)"));
    }
    if (i > 0 && t->offset < end) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(t), " overlaps ", sorted[i - 1]->name));
    }
    end = t->offset + t->nbytes;
    used += t->nbytes;
  }
  loc->offset = sorted[0]->offset;
  loc->length = end - loc->offset;
  const uint64_t gap = loc->length - used;
  if (gap >= max_gap) {
    return absl::FailedPreconditionError(absl::StrCat(
        "layer ", key.layer, " expert ", key.expert, " in ", parts[0]->file,
        " is not one contiguous run: its ", parts.size(), " tensors span ",
        loc->length, " bytes from offset ", loc->offset, " with ", gap,
        " unused bytes between them (limit ", max_gap,
        "); run `flotilla-tool pack` to write packed expert files"));
  }
  *has_gap = gap > 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    loc->tensor_offsets[i] = parts[i]->offset - loc->offset;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ExpertIndex> ExpertIndex::FromTensorSource(
    const model::TensorSource& source, const ExpertIndexOptions& options) {
  std::map<ExpertKey, FoundExpertTensors> groups;
  source.ForEachTensor([&](const model::TensorInfo& t) {
    ParsedName p;
    if (!ParseExpertName(t.name, &p)) return;
    if (options.only_layer >= 0 && p.key.layer != options.only_layer) return;
    if (options.config != nullptr &&
        options.config->IsUnusedLayer(p.key.layer)) {
      return;
    }
    FoundExpertTensors& g = groups[p.key];
    g.naming = p.naming;
    g.t[p.which][p.part] = &t;
  });
  IndexBuilder builder;
  std::string source_name;
  size_t noncontiguous = 0;
  for (const auto& [key, g] : groups) {
    FLOTILLA_ASSIGN_OR_RETURN(ExpertTensors tensors,
                              CheckExpertTensors(g, key));
    const std::vector<const TensorInfo*>& parts = tensors.parts;
    ExpertLocation loc;
    bool has_gap = false;
    FLOTILLA_RETURN_IF_ERROR(
        BindRun(key, parts, options.max_gap_bytes, &loc, &has_gap));
    noncontiguous += has_gap ? 1 : 0;
    if (source_name.empty()) source_name = parts[0]->file;
    FLOTILLA_RETURN_IF_ERROR(builder.Add(key, parts[0]->file, loc,
                                         tensors.format, tensors.shapes,
                                         Where(parts[0])));
  }
  builder.set_noncontiguous(noncontiguous);
  return builder.Finish(options.config, options.only_layer,
                        source_name.empty() ? "the checkpoint" : source_name);
}

const ExpertLocation* ExpertIndex::Find(const ExpertKey& key) const {
  if (key.layer < 0 || key.layer >= num_layers_ || key.expert < 0 ||
      key.expert >= num_experts_) {
    return nullptr;
  }
  const ExpertLocation& loc =
      locations_[static_cast<size_t>(key.layer) * num_experts_ + key.expert];
  return loc.present ? &loc : nullptr;
}

absl::StatusOr<const ExpertLocation*> ExpertIndex::Get(
    const ExpertKey& key) const {
  const ExpertLocation* loc = Find(key);
  if (loc == nullptr) {
    return absl::NotFoundError(absl::StrCat("layer ", key.layer, " expert ",
                                            key.expert,
                                            " is not in the expert index"));
  }
  return loc;
}

bool ExpertIndex::HasLayer(int layer) const {
  if (layer < 0 || layer >= num_layers_) return false;
  for (int e = 0; e < num_experts_; ++e) {
    if (locations_[static_cast<size_t>(layer) * num_experts_ + e].present) {
      return true;
    }
  }
  return false;
}

std::vector<ExpertKey> ExpertIndex::Keys() const {
  std::vector<ExpertKey> keys;
  keys.reserve(size_);
  for (int l = 0; l < num_layers_; ++l) {
    for (int e = 0; e < num_experts_; ++e) {
      if (Find(ExpertKey{l, e}) != nullptr) keys.push_back(ExpertKey{l, e});
    }
  }
  return keys;
}

uint64_t ExpertIndex::RunBytesFor(const model::MoeSpec& config,
                                  ExpertFormat format) {
  // w1 and w3 [I][H], w2 [H][I].
  const ExpertCodec& codec = CodecOf(format);
  const uint64_t h = config.hidden_size, i = config.intermediate_size;
  return 2 * codec.MatrixBytes(i, h) + codec.MatrixBytes(h, i);
}

uint64_t ExpertIndex::SlotBytesFor(uint64_t run_bytes) {
  return io::AlignUp(run_bytes) + io::kDirectIoAlignment;
}

uint64_t ExpertIndex::memory_bytes() const {
  uint64_t bytes = locations_.capacity() * sizeof(ExpertLocation) +
                   files_.capacity() * sizeof(std::string);
  for (const std::string& f : files_) bytes += f.capacity() + 1;
  return bytes;
}

uint64_t ExpertIndex::MemoryBytesFor(int num_layers, int num_experts,
                                     int num_files) {
  return static_cast<uint64_t>(std::max(0, num_layers)) *
             static_cast<uint64_t>(std::max(0, num_experts)) *
             sizeof(ExpertLocation) +
         static_cast<uint64_t>(std::max(0, num_files)) *
             (sizeof(std::string) + 64);
}

absl::Status ExpertIndex::SetChecksum(const ExpertKey& key, uint64_t checksum) {
  FLOTILLA_RETURN_IF_ERROR(Get(key).status());
  ExpertLocation& loc =
      locations_[static_cast<size_t>(key.layer) * num_experts_ + key.expert];
  loc.has_checksum = true;
  loc.checksum = checksum;
  return absl::OkStatus();
}

std::string ExpertIndex::Describe(const ExpertKey& key) const {
  const ExpertLocation* loc = Find(key);
  if (loc == nullptr) {
    return absl::StrCat("layer ", key.layer, " expert ", key.expert);
  }
  return absl::StrCat("layer ", key.layer, " expert ", key.expert, " (",
                      files_[loc->file], " at offset ", loc->offset, ", ",
                      loc->length, " bytes)");
}

}  // namespace flotilla::experts
