#include "shared/experts/index_builder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/experts/expert_codec.h"
#include "shared/io/aligned_buffer.h"

namespace flotilla::experts {
namespace {

std::string ShapeText(const MatrixShape& s) {
  return absl::StrCat("[", s.rows, ",", s.cols, "]");
}

}  // namespace

absl::Status IndexBuilder::Add(const ExpertKey& key,
                               const std::string& file_path,
                               ExpertLocation location, ExpertFormat format,
                               const std::array<MatrixShape, 3>& shapes,
                               const std::string& what) {
  if (key.layer < 0 || key.expert < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": negative layer or expert index"));
  }
  if (!have_format_) {
    index_.format_ = format;
    index_.shapes_ = shapes;
    have_format_ = true;
  } else {
    if (format != index_.format_) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": expert format ", ExpertFormatName(format),
                       " differs from the other experts' ",
                       ExpertFormatName(index_.format_)));
    }
    for (int w = 0; w < 3; ++w) {
      if (shapes[w].rows != index_.shapes_[w].rows ||
          shapes[w].cols != index_.shapes_[w].cols) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": w", w + 1, " has logical shape ", ShapeText(shapes[w]),
            " but other experts have ", ShapeText(index_.shapes_[w])));
      }
    }
  }
  auto [it, inserted] =
      file_ids_.emplace(file_path, static_cast<uint32_t>(index_.files_.size()));
  if (inserted) index_.files_.push_back(file_path);
  location.file = it->second;
  location.present = true;
  if (!experts_.emplace(key, location).second) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": layer ", key.layer,
                                                   " expert ", key.expert,
                                                   " is listed twice"));
  }
  return absl::OkStatus();
}

absl::Status IndexBuilder::CheckConfig(const model::MoeSpec& c, int only_layer,
                                       const std::string& source) const {
  const uint64_t lat = c.hidden_size;
  const uint64_t inter = c.intermediate_size;
  const MatrixShape want[3] = {{inter, lat}, {lat, inter}, {inter, lat}};
  if (have_format_ &&
      (index_.format_ == ExpertFormat::kMxfp4Bias) != c.expert_biases) {
    // Without their biases gpt-oss's experts would compute silently wrong
    // outputs; with biases another family's would too.
    return absl::InvalidArgumentError(absl::StrCat(
        "the experts in ", source, " are ", ExpertFormatName(index_.format_),
        " but the config's family ",
        c.expert_biases ? "gives every expert matrix a bias"
                        : "has no expert biases"));
  }
  if (have_format_) {
    for (int w = 0; w < 3; ++w) {
      const MatrixShape& got = index_.shapes_[w];
      if (got.rows != want[w].rows || got.cols != want[w].cols) {
        const ExpertKey first = experts_.begin()->first;
        return absl::InvalidArgumentError(
            absl::StrCat("expert w", w + 1, " in ", source, " (e.g. ",
                         ExpertTensorName(c.expert_names, first.layer,
                                          first.expert, w, "weight*"),
                         ") has logical shape ", ShapeText(got), ", expected ",
                         ShapeText(want[w]), " from the config (latent ", lat,
                         ", moe_intermediate_size ", inter, ")"));
      }
    }
  }
  for (const auto& [key, loc] : experts_) {
    if (key.layer >= c.num_layers || c.IsDenseLayer(key.layer) ||
        key.expert >= c.num_experts) {
      return absl::InvalidArgumentError(absl::StrCat(
          "expert ",
          ExpertTensorName(c.expert_names, key.layer, key.expert, 0, "*"),
          " in ", source, " is outside the config (", c.num_layers,
          " layers, first ", c.first_moe_layer, " dense, ", c.num_experts,
          " experts)"));
    }
  }
  for (int layer = 0; layer < c.num_layers; ++layer) {
    if (c.IsDenseLayer(layer)) continue;
    if (only_layer >= 0 && layer != only_layer) continue;
    for (int e = 0; e < c.num_experts; ++e) {
      if (experts_.count(ExpertKey{layer, e}) == 0) {
        return absl::NotFoundError(absl::StrCat(
            "missing tensor ",
            ExpertTensorName(c.expert_names, layer, e, 0,
                             CodecOf(index_.format_).suffixes[0]),
            " (expert ", e, " of layer ", layer, " is not in ", source, ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ExpertIndex> IndexBuilder::Finish(const model::MoeSpec* config,
                                                 int only_layer,
                                                 const std::string& source) {
  if (config != nullptr) {
    FLOTILLA_RETURN_IF_ERROR(CheckConfig(*config, only_layer, source));
  }
  if (experts_.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no routed expert tensors found in ", source));
  }
  ExpertIndex& x = index_;
  x.num_layers_ = 0;
  x.num_experts_ = 0;
  for (const auto& [key, loc] : experts_) {
    x.num_layers_ = std::max(x.num_layers_, key.layer + 1);
    x.num_experts_ = std::max(x.num_experts_, key.expert + 1);
  }
  if (config != nullptr) {
    x.num_layers_ = std::max(x.num_layers_, config->num_layers);
    x.num_experts_ = std::max(x.num_experts_, config->num_experts);
  }
  x.locations_.assign(
      static_cast<size_t>(x.num_layers_) * static_cast<size_t>(x.num_experts_),
      ExpertLocation{});
  x.size_ = experts_.size();
  for (const auto& [key, loc] : experts_) {
    x.locations_[static_cast<size_t>(key.layer) * x.num_experts_ + key.expert] =
        loc;
    x.max_run_bytes_ = std::max(x.max_run_bytes_, loc.length);
    x.max_aligned_run_bytes_ =
        std::max(x.max_aligned_run_bytes_,
                 io::AlignForDirectIo(loc.offset, loc.length).length);
  }
  return std::move(index_);
}

}  // namespace flotilla::experts
