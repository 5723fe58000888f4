// gpt-oss stores each layer's routed experts fused: one tensor holds every
// expert's gate_up (or down) MXFP4 blocks, one their scales, one their BF16
// biases, and gate_up interleaves gate and up by row (row 2j = gate j, row
// 2j + 1 = up j). Everything that reads experts (the expert index, the
// in-memory reference, `flotilla-tool pack`, `pack --workers`) reads one
// expert's tensors by name, so this view presents the fused tensors as
// per-expert ones and hides them:
//
//   model.layers.<L>.mlp.experts.<e>.gate_proj.weight_packed  U8 [I][H/2]
//                                   .gate_proj.weight_scale   U8 [I][H/32]
//                                   .gate_proj.bias           F32 [I]
//   ... up_proj (the odd rows), down_proj [H][I/2], [H][I/32], F32 [H]
//
// Those are the mxfp4_bias expert format (shared/experts/expert_codec.h):
// the same nibbles, scales and bias values, de-interleaved and widened
// exactly, so no arithmetic changes. Their bytes exist only through this
// view's ReadRaw (TensorInfo::derived); a pack copies them into runs of its
// own. Every other tensor is the checkpoint's own.
//
// Thread-safety: ReadRaw may be called concurrently (it keeps the last
// fused slice read under a mutex, since gate and up come from one slice).
#ifndef FLOTILLA_SHARED_FAMILY_GPT_OSS_GPT_OSS_EXPERT_VIEW_H_
#define FLOTILLA_SHARED_FAMILY_GPT_OSS_GPT_OSS_EXPERT_VIEW_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/family/gpt_oss/gpt_oss_config.h"
#include "shared/model/tensor_source.h"

namespace flotilla::family::gpt_oss {

class ExpertView : public model::TensorSource {
 public:
  // Checks every layer's six fused tensors against `config` (dtype and
  // shape; InvalidArgument or NotFound naming the tensor and its file).
  // `raw` must outlive the view.
  static absl::StatusOr<std::unique_ptr<ExpertView>> Create(
      const model::TensorSource& raw, const model::GptOssConfig& config);

  const model::TensorInfo* Find(absl::string_view name) const override;
  std::vector<std::string> Names() const override;
  absl::Status ReadRaw(const model::TensorInfo& info, void* dst) const override;

 private:
  // One per-expert tensor: which fused tensor, expert, and rows.
  struct Cut {
    const model::TensorInfo* fused = nullptr;
    int expert = 0;
    // Rows of the expert's [rows][row_bytes] slice taken: first, step.
    int first_row = 0;
    int row_step = 1;
    uint64_t slice_rows = 0;  // rows in one expert's slice
    uint64_t row_bytes = 0;   // bytes of one slice row (BF16: 2)
    bool widen_bf16 = false;  // a bias: BF16 values to F32
  };

  explicit ExpertView(const model::TensorSource& raw) : raw_(raw) {}
  absl::Status AddLayer(const model::GptOssConfig& config, int layer);
  // The expert's whole slice of `cut.fused`, from the one-slice cache
  // (valid while mu_ is held).
  absl::StatusOr<const uint8_t*> ReadSlice(const Cut& cut) const;

  const model::TensorSource& raw_;
  std::map<std::string, model::TensorInfo, std::less<>> infos_;
  std::map<std::string, Cut, std::less<>> cuts_;
  std::map<std::string, bool, std::less<>> hidden_;  // the fused tensors
  mutable std::mutex mu_;
  mutable const model::TensorInfo* cached_fused_ = nullptr;
  mutable int cached_expert_ = -1;
  mutable std::vector<uint8_t> cached_slice_;
};

}  // namespace flotilla::family::gpt_oss

#endif  // FLOTILLA_SHARED_FAMILY_GPT_OSS_GPT_OSS_EXPERT_VIEW_H_
