#include "shared/experts/expert_tensors.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "shared/base/status_macros.h"
#include "shared/experts/expert_codec.h"
#include "shared/model/tensor_names.h"

namespace flotilla::experts {
namespace {

using model::DType;
using model::TensorInfo;

std::string ShapeText(const std::vector<int64_t>& s) {
  return absl::StrCat("[", absl::StrJoin(s, ","), "]");
}

std::string Where(const TensorInfo* t) {
  return absl::StrCat("tensor ", t->name, " in ", t->file);
}

absl::Status Check2d(const TensorInfo* t) {
  if (t->shape.size() != 2 || t->shape[0] <= 0 || t->shape[1] <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(t), " has shape ", ShapeText(t->shape),
                     ", expected a non-empty 2-D matrix"));
  }
  return absl::OkStatus();
}

absl::Status CheckU8(const TensorInfo* t) {
  if (t->dtype != DType::kU8) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(t), " has dtype ", model::DTypeName(t->dtype), ", expected U8"));
  }
  return Check2d(t);
}

// Validates one MXFP4 matrix; appends its two tensors to `parts`.
absl::Status BindMxfp4(const FoundExpertTensors& g, const ExpertKey& key, int w,
                       MatrixShape* shape,
                       std::vector<const TensorInfo*>* parts) {
  const TensorInfo* packed = g.t[w][kPackedPart];
  const TensorInfo* scale = g.t[w][kScalePart];
  if (packed == nullptr || scale == nullptr) {
    const TensorInfo* have = packed != nullptr ? packed : scale;
    return absl::NotFoundError(absl::StrCat(
        "missing tensor ",
        ExpertTensorName(g.naming, key.layer, key.expert, w,
                         packed == nullptr ? "weight_packed" : "weight_scale"),
        " (", have->name, " exists in ", have->file, ")"));
  }
  FLOTILLA_RETURN_IF_ERROR(CheckU8(packed));
  FLOTILLA_RETURN_IF_ERROR(CheckU8(scale));
  if (packed->shape[0] != scale->shape[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(scale), " has ", scale->shape[0], " rows but ",
                     packed->name, " has ", packed->shape[0]));
  }
  if (scale->shape[1] * 32 != packed->shape[1] * 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(scale), " has ", scale->shape[1], " columns; expected ",
        packed->shape[1] * 2, " / 32 for ", packed->name, " of shape ",
        ShapeText(packed->shape), " (MXFP4 group size 32)"));
  }
  shape->rows = packed->shape[0];
  shape->cols = packed->shape[1] * 2;
  parts->push_back(packed);
  parts->push_back(scale);
  return absl::OkStatus();
}

// The bias of MXFP4 matrix w (mxfp4_bias): F32 [rows].
absl::Status BindBias(const FoundExpertTensors& g, const ExpertKey& key, int w,
                      const MatrixShape& shape,
                      std::vector<const TensorInfo*>* parts) {
  const TensorInfo* bias = g.t[w][kBiasPart];
  if (bias == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "missing tensor ",
        ExpertTensorName(g.naming, key.layer, key.expert, w, "bias"),
        " (the expert's other matrices have biases)"));
  }
  if (bias->dtype != DType::kF32 || bias->shape.size() != 1 ||
      static_cast<uint64_t>(bias->shape[0]) != shape.rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(bias), " is ", model::DTypeName(bias->dtype), " ",
        ShapeText(bias->shape), ", expected F32 [", shape.rows, "]"));
  }
  parts->push_back(bias);
  return absl::OkStatus();
}

absl::Status BindDense(const FoundExpertTensors& g, const ExpertKey& key, int w,
                       DType* dtype, MatrixShape* shape,
                       std::vector<const TensorInfo*>* parts) {
  const TensorInfo* t = g.t[w][kDensePart];
  if (t == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "missing tensor ",
        ExpertTensorName(g.naming, key.layer, key.expert, w, "weight_packed"),
        " (nor a dense ",
        ExpertTensorName(g.naming, key.layer, key.expert, w, "weight"), ")"));
  }
  if (t->dtype != DType::kF32 && t->dtype != DType::kBF16 &&
      t->dtype != DType::kF8E4M3) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(t), " has dtype ", model::DTypeName(t->dtype),
                     ", expected F32, BF16 or F8_E4M3"));
  }
  if (w > 0 && t->dtype != *dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(t), " has dtype ", model::DTypeName(t->dtype), " but w1 is ",
        model::DTypeName(*dtype), " (an expert's matrices share one dtype)"));
  }
  *dtype = t->dtype;
  FLOTILLA_RETURN_IF_ERROR(Check2d(t));
  shape->rows = t->shape[0];
  shape->cols = t->shape[1];
  parts->push_back(t);
  const TensorInfo* scale = g.t[w][kScaleInvPart];
  if (t->dtype != DType::kF8E4M3) {
    if (scale != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(scale), " scales ", t->name, ", which is ",
                       model::DTypeName(t->dtype), ", not F8_E4M3"));
    }
    return absl::OkStatus();
  }
  // FP8: one float scale per 128x128 block, edge blocks partial.
  if (scale == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("missing tensor ",
                     ExpertTensorName(g.naming, key.layer, key.expert, w,
                                      "weight_scale_inv"),
                     ": ", Where(t), " is F8_E4M3 and needs its block scales"));
  }
  const std::vector<int64_t> grid = {(t->shape[0] + 127) / 128,
                                     (t->shape[1] + 127) / 128};
  if (scale->dtype != DType::kF32 || scale->shape != grid) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(scale), " is ", model::DTypeName(scale->dtype), " ",
                     ShapeText(scale->shape), ", expected F32 ",
                     ShapeText(grid), " (one scale per 128x128 block of ",
                     t->name, " ", ShapeText(t->shape), ")"));
  }
  parts->push_back(scale);
  return absl::OkStatus();
}

}  // namespace

const char* ExpertFormatName(ExpertFormat format) {
  return CodecOf(format).name;
}

std::string ExpertTensorName(const model::ExpertNaming& naming, int layer,
                             int expert, int which, const char* suffix) {
  return model::ExpertMatrixPrefix(naming, layer, expert, which) + suffix;
}

FoundExpertTensors FindExpertTensors(const model::TensorSource& source,
                                     const model::ExpertNaming& naming,
                                     int layer, int expert) {
  FoundExpertTensors found;
  found.naming = naming;
  for (int w = 0; w < 3; ++w) {
    const std::string base =
        model::ExpertMatrixPrefix(naming, layer, expert, w);
    for (int p = 0; p < kExpertTensorParts; ++p) {
      found.t[w][p] = source.Find(base + kExpertPartSuffix[p]);
    }
  }
  return found;
}

absl::StatusOr<ExpertTensors> CheckExpertTensors(const FoundExpertTensors& g,
                                                 const ExpertKey& key) {
  ExpertTensors out;
  const bool mxfp4 =
      g.t[0][kPackedPart] != nullptr || g.t[0][kScalePart] != nullptr;
  bool biased = false;
  for (int w = 0; w < 3; ++w) biased = biased || g.t[w][kBiasPart] != nullptr;
  if (biased && !mxfp4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expert ", key.expert, " of layer ", key.layer,
        " has bias tensors but no MXFP4 matrices (biases are read with "
        "MXFP4 experts only)"));
  }
  DType dtype = DType::kF32;
  for (int w = 0; w < 3; ++w) {
    if (mxfp4) {
      FLOTILLA_RETURN_IF_ERROR(
          BindMxfp4(g, key, w, &out.shapes[w], &out.parts));
      if (biased) {
        FLOTILLA_RETURN_IF_ERROR(
            BindBias(g, key, w, out.shapes[w], &out.parts));
      }
    } else {
      FLOTILLA_RETURN_IF_ERROR(
          BindDense(g, key, w, &dtype, &out.shapes[w], &out.parts));
    }
  }
  out.format = biased                    ? ExpertFormat::kMxfp4Bias
               : mxfp4                   ? ExpertFormat::kMxfp4
               : dtype == DType::kBF16   ? ExpertFormat::kBF16
               : dtype == DType::kF8E4M3 ? ExpertFormat::kFp8
                                         : ExpertFormat::kF32;
  return out;
}

absl::Status CheckExpertShapes(const ExpertTensors& tensors,
                               const model::MoeSpec& config,
                               const ExpertKey& key) {
  const uint64_t lat = config.hidden_size, inter = config.intermediate_size;
  const MatrixShape want[3] = {{inter, lat}, {lat, inter}, {inter, lat}};
  for (int w = 0; w < 3; ++w) {
    const MatrixShape& got = tensors.shapes[w];
    if (got.rows != want[w].rows || got.cols != want[w].cols) {
      return absl::InvalidArgumentError(absl::StrCat(
          "expert ",
          ExpertTensorName(config.expert_names, key.layer, key.expert, w,
                           "weight*"),
          " has logical shape [", got.rows, ",", got.cols, "], expected [",
          want[w].rows, ",", want[w].cols, "] from the config (latent ", lat,
          ", intermediate ", inter, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace flotilla::experts
