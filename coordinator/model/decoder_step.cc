#include "coordinator/model/decoder_step.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "shared/kernels/kernels.h"

namespace flotilla::coordinator {

StepRows LayOutStep(const std::vector<size_t>& first,
                    const std::vector<const std::vector<int32_t>*>& ids) {
  StepRows s;
  s.offset.assign(ids.size() + 1, 0);
  for (size_t i = 0; i < ids.size(); ++i) {
    s.offset[i + 1] = s.offset[i] + ids[i]->size();
    for (size_t t = 0; t < ids[i]->size(); ++t)
      s.position.push_back(first[i] + t);
  }
  return s;
}

void EmbedRows(const kernels::DenseMatrix& embed,
               const std::vector<const std::vector<int32_t>*>& ids, float* h) {
  const size_t e = embed.cols;
  size_t r = 0;
  for (const std::vector<int32_t>* list : ids) {
    for (int32_t id : *list) {
      const size_t row = static_cast<size_t>(id) * e;
      for (size_t k = 0; k < e; ++k, ++r) {
        h[r] = embed.type == kernels::DenseType::kF32
                   ? static_cast<const float*>(embed.data)[row + k]
                   : kernels::Bf16ToF32(
                         static_cast<const uint16_t*>(embed.data)[row + k]);
      }
    }
  }
}

absl::Status CheckFinite(const std::vector<float>& x, size_t width,
                         const char* what, const StepRows& step,
                         const std::vector<size_t>* rows) {
  for (size_t k = 0; k < x.size(); ++k) {
    if (!std::isfinite(x[k])) {
      const size_t r = k / width;
      return absl::DataLossError(absl::StrCat(
          "non-finite ", what, " (", x[k], ") at position ",
          step.position[rows != nullptr ? (*rows)[r] : r], ", element ",
          k % width, ": the weights or the computation are broken"));
    }
  }
  return absl::OkStatus();
}

absl::Status FinalLogits(const RegionTrunk& trunk, const std::vector<float>& h,
                         size_t hidden, float eps, const StepRows& step,
                         const std::vector<size_t>& out_rows,
                         std::vector<float>* logits,
                         kernels::ThreadPool* pool) {
  std::vector<float> normed(out_rows.size() * hidden);
  for (size_t r = 0; r < out_rows.size(); ++r) {
    kernels::RmsNorm(h.data() + out_rows[r] * hidden, trunk.final_norm(),
                     hidden, eps, normed.data() + r * hidden);
  }
  const size_t vocab = trunk.lm_head().rows;
  logits->resize(out_rows.size() * vocab);
  kernels::MatMul(trunk.lm_head(), normed.data(), out_rows.size(),
                  logits->data(), pool);
  return CheckFinite(*logits, vocab, "logit", step, &out_rows);
}

}  // namespace flotilla::coordinator
