#include "shared/family/gpt_oss/gpt_oss_expert_view.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "shared/base/status_macros.h"
#include "shared/model/float16.h"
#include "shared/model/tensor_names.h"

namespace flotilla::family::gpt_oss {
namespace {

using model::DType;
using model::TensorInfo;

std::string ShapeText(const std::vector<int64_t>& s) {
  return absl::StrCat("[", absl::StrJoin(s, ","), "]");
}

// The fused tensor `name`, of `dtype` and `shape` exactly.
absl::StatusOr<const TensorInfo*> FindFused(const model::TensorSource& raw,
                                            const std::string& name,
                                            DType dtype,
                                            const std::vector<int64_t>& shape) {
  const TensorInfo* t = raw.Find(name);
  if (t == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("missing tensor ", name,
                     " (gpt-oss keeps each layer's experts fused)"));
  }
  if (t->dtype != dtype || t->shape != shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor ", name, " in ", t->file, " is ", model::DTypeName(t->dtype),
        " ", ShapeText(t->shape), ", expected ", model::DTypeName(dtype), " ",
        ShapeText(shape),
        " from config.json (num_local_experts, intermediate_size, "
        "hidden_size)"));
  }
  return t;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ExpertView>> ExpertView::Create(
    const model::TensorSource& raw, const model::GptOssConfig& config) {
  if (!config.mxfp4_experts) {
    return absl::InvalidArgumentError(
        "config.json has no MXFP4 quantization_config: gpt-oss checkpoints "
        "with dequantised (BF16) experts are not read; use the MXFP4 "
        "release");
  }
  if (config.hidden_size % 32 != 0 || config.intermediate_size % 32 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("hidden_size ", config.hidden_size,
                     " and intermediate_size ", config.intermediate_size,
                     " must be multiples of 32 (the MXFP4 group size)"));
  }
  auto view = std::unique_ptr<ExpertView>(new ExpertView(raw));
  for (int layer = 0; layer < config.num_hidden_layers; ++layer) {
    FLOTILLA_RETURN_IF_ERROR(view->AddLayer(config, layer));
  }
  return view;
}

absl::Status ExpertView::AddLayer(const model::GptOssConfig& config,
                                  int layer) {
  const int64_t e = config.num_local_experts, h = config.hidden_size,
                i = config.intermediate_size;
  const std::string fused =
      absl::StrCat("model.layers.", layer, ".mlp.experts.");
  struct Matrix {
    const char* name;  // of the fused tensors
    int which;         // 0, 1, 2: gate, down, up (tensor_names.h)
    int first_row, row_step;
    int64_t rows, cols;  // of one expert's fused slice
  };
  const Matrix matrices[3] = {{"gate_up_proj", 0, 0, 2, 2 * i, h},
                              {"down_proj", 1, 0, 1, h, i},
                              {"gate_up_proj", 2, 1, 2, 2 * i, h}};
  const model::ExpertNaming naming{"model.", &model::kMlpExperts};
  for (const Matrix& m : matrices) {
    const std::string base = fused + m.name;
    FLOTILLA_ASSIGN_OR_RETURN(const TensorInfo* blocks,
                              FindFused(raw_, base + "_blocks", DType::kU8,
                                        {e, m.rows, m.cols / 32, 16}));
    FLOTILLA_ASSIGN_OR_RETURN(const TensorInfo* scales,
                              FindFused(raw_, base + "_scales", DType::kU8,
                                        {e, m.rows, m.cols / 32}));
    FLOTILLA_ASSIGN_OR_RETURN(
        const TensorInfo* bias,
        FindFused(raw_, base + "_bias", DType::kBF16, {e, m.rows}));
    for (const TensorInfo* t : {blocks, scales, bias}) hidden_[t->name] = true;
    const int64_t out_rows = m.rows / m.row_step;
    struct Part {
      const char* suffix;
      const TensorInfo* fused;
      DType dtype;
      std::vector<int64_t> shape;
      uint64_t row_bytes;
    };
    const Part parts[3] = {
        {"weight_packed",
         blocks,
         DType::kU8,
         {out_rows, m.cols / 2},
         static_cast<uint64_t>(m.cols / 2)},
        {"weight_scale",
         scales,
         DType::kU8,
         {out_rows, m.cols / 32},
         static_cast<uint64_t>(m.cols / 32)},
        {"bias", bias, DType::kF32, {out_rows}, 2},
    };
    for (int x = 0; x < e; ++x) {
      for (const Part& p : parts) {
        TensorInfo info;
        info.name =
            model::ExpertMatrixPrefix(naming, layer, x, m.which) + p.suffix;
        info.dtype = p.dtype;
        info.shape = p.shape;
        info.file = p.fused->file;
        info.offset = p.fused->offset;
        info.nbytes = static_cast<uint64_t>(out_rows) *
                      (p.dtype == DType::kF32 ? 4 : p.row_bytes);
        info.derived = true;
        Cut cut;
        cut.fused = p.fused;
        cut.expert = x;
        cut.first_row = m.first_row;
        cut.row_step = m.row_step;
        cut.slice_rows = static_cast<uint64_t>(m.rows);
        cut.row_bytes = p.row_bytes;
        cut.widen_bf16 = p.dtype == DType::kF32;
        cuts_[info.name] = cut;
        infos_[info.name] = std::move(info);
      }
    }
  }
  return absl::OkStatus();
}

const TensorInfo* ExpertView::Find(absl::string_view name) const {
  auto it = infos_.find(name);
  if (it != infos_.end()) return &it->second;
  if (hidden_.find(name) != hidden_.end()) return nullptr;
  return raw_.Find(name);
}

std::vector<std::string> ExpertView::Names() const {
  std::vector<std::string> names;
  for (const std::string& n : raw_.Names()) {
    if (hidden_.find(n) == hidden_.end()) names.push_back(n);
  }
  for (const auto& [n, info] : infos_) names.push_back(n);
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<const uint8_t*> ExpertView::ReadSlice(const Cut& cut) const {
  const uint64_t bytes = cut.slice_rows * cut.row_bytes;
  if (cached_fused_ != cut.fused || cached_expert_ != cut.expert) {
    cached_fused_ = nullptr;
    cached_slice_.resize(bytes);
    FLOTILLA_RETURN_IF_ERROR(
        raw_.ReadRange(*cut.fused, static_cast<uint64_t>(cut.expert) * bytes,
                       bytes, cached_slice_.data()));
    cached_fused_ = cut.fused;
    cached_expert_ = cut.expert;
  }
  return cached_slice_.data();
}

absl::Status ExpertView::ReadRaw(const TensorInfo& info, void* dst) const {
  if (!info.derived) return raw_.ReadRaw(info, dst);
  auto it = cuts_.find(info.name);
  if (it == cuts_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", info.name, "' is not one of this gpt-oss view's"));
  }
  const Cut& cut = it->second;
  std::lock_guard<std::mutex> lock(mu_);
  FLOTILLA_ASSIGN_OR_RETURN(const uint8_t* slice, ReadSlice(cut));
  uint8_t* out = static_cast<uint8_t*>(dst);
  const uint64_t rows = cut.slice_rows / cut.row_step;
  for (uint64_t r = 0; r < rows; ++r) {
    const uint8_t* src =
        slice + (cut.first_row + r * cut.row_step) * cut.row_bytes;
    if (cut.widen_bf16) {
      uint16_t bits;
      std::memcpy(&bits, src, sizeof(bits));
      const float v = model::Bf16ToF32(bits);
      std::memcpy(out + r * sizeof(float), &v, sizeof(float));
    } else {
      std::memcpy(out + r * cut.row_bytes, src, cut.row_bytes);
    }
  }
  return absl::OkStatus();
}

}  // namespace flotilla::family::gpt_oss
