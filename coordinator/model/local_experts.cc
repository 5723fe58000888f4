#include "coordinator/model/local_experts.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/model/weights.h"
#include "shared/base/status_macros.h"
#include "shared/model/tensor_names.h"
#include "shared/experts/combine.h"

namespace flotilla::coordinator {
namespace {

using model::DType;
using model::TensorInfo;

std::string Shape(const std::vector<int64_t>& s) {
  return absl::StrCat("[", absl::StrJoin(s, ","), "]");
}

absl::Status CheckTensor(const TensorInfo* t, const std::string& name,
                         DType want_a, DType want_b,
                         std::vector<int64_t> shape) {
  if (t->dtype != want_a && t->dtype != want_b) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor ", name, " in ", t->file, " has dtype ",
        model::DTypeName(t->dtype), ", expected ", model::DTypeName(want_a)));
  }
  if (t->shape != shape) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", name, " in ", t->file, " has shape ",
                     Shape(t->shape), ", expected ", Shape(shape)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalExperts>> LocalExperts::Create(
    const model::TensorSource* source, const model::K3Config& config,
    kernels::ThreadPool* pool, int only_layer) {
  auto experts =
      std::unique_ptr<LocalExperts>(new LocalExperts(source, config, pool));
  FLOTILLA_RETURN_IF_ERROR(experts->Bind(only_layer));
  return experts;
}

absl::Status LocalExperts::BindMatrix(int layer, int expert, int which,
                                      size_t rows, size_t cols,
                                      ExpertMatrix* m) {
  const std::string base = model::ExpertMatrixPrefix(layer, expert, which);
  m->rows = rows;
  m->cols = cols;
  const int64_t r = rows, c = cols;
  if (const TensorInfo* packed = source_->Find(base + "weight_packed")) {
    const TensorInfo* scale = source_->Find(base + "weight_scale");
    if (scale == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("missing tensor ", base, "weight_scale (", base,
                       "weight_packed exists in ", packed->file, ")"));
    }
    if (cols % 32 != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("MXFP4 tensor ", base, "weight_packed: logical width ",
                       cols, " is not a multiple of 32"));
    }
    FLOTILLA_RETURN_IF_ERROR(CheckTensor(packed, base + "weight_packed",
                                         DType::kU8, DType::kU8, {r, c / 2}));
    FLOTILLA_RETURN_IF_ERROR(CheckTensor(scale, base + "weight_scale",
                                         DType::kU8, DType::kU8, {r, c / 32}));
    m->packed = packed;
    m->scale = scale;
    return absl::OkStatus();
  }
  if (const TensorInfo* dense = source_->Find(base + "weight")) {
    FLOTILLA_RETURN_IF_ERROR(
        CheckTensor(dense, base + "weight", DType::kF32, DType::kBF16, {r, c}));
    m->packed = dense;
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat(
      "missing tensor ", base, "weight_packed (nor a dense ", base, "weight)"));
}

absl::Status LocalExperts::Bind(int only_layer) {
  const model::K3Config& c = config_;
  const size_t lat = c.routed_expert_hidden_size,
               inter = c.moe_intermediate_size;
  experts_.resize(c.num_hidden_layers);
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    if (c.IsDenseLayer(layer)) continue;
    if (only_layer >= 0 && layer != only_layer) continue;
    experts_[layer].resize(c.num_experts);
    for (int e = 0; e < c.num_experts; ++e) {
      Expert& ex = experts_[layer][e];
      FLOTILLA_RETURN_IF_ERROR(BindMatrix(layer, e, 0, inter, lat, &ex.w[0]));
      FLOTILLA_RETURN_IF_ERROR(BindMatrix(layer, e, 1, lat, inter, &ex.w[1]));
      FLOTILLA_RETURN_IF_ERROR(BindMatrix(layer, e, 2, inter, lat, &ex.w[2]));
    }
  }
  return absl::OkStatus();
}

absl::Status LocalExperts::Apply(const ExpertMatrix& m, const float* x,
                                 size_t n, float* y,
                                 std::vector<uint8_t>* buf) {
  const size_t packed_bytes = m.packed->nbytes;
  const size_t scale_bytes = m.scale ? m.scale->nbytes : 0;
  if (buf->size() < packed_bytes + scale_bytes) {
    buf->resize(packed_bytes + scale_bytes);
  }
  FLOTILLA_RETURN_IF_ERROR(source_->ReadRaw(*m.packed, buf->data()));
  bytes_read_ += packed_bytes;
  if (m.scale != nullptr) {
    FLOTILLA_RETURN_IF_ERROR(
        source_->ReadRaw(*m.scale, buf->data() + packed_bytes));
    bytes_read_ += scale_bytes;
    kernels::Mxfp4Matrix w;
    w.packed = buf->data();
    w.scales = buf->data() + packed_bytes;
    w.rows = m.rows;
    w.cols = m.cols;
    kernels::MatMulMxfp4(w, x, n, y, pool_);
    return absl::OkStatus();
  }
  kernels::DenseMatrix w;
  w.type = m.packed->dtype == DType::kBF16 ? kernels::DenseType::kBF16
                                           : kernels::DenseType::kF32;
  w.data = buf->data();
  w.rows = m.rows;
  w.cols = m.cols;
  kernels::MatMul(w, x, n, y, pool_);
  return absl::OkStatus();
}

absl::Status LocalExperts::ComputeLayer(int layer, const float* z, int rows,
                                        const std::vector<ExpertTask>& tasks,
                                        float* out) {
  const model::K3Config& c = config_;
  if (layer < 0 || layer >= c.num_hidden_layers || experts_[layer].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, " has no routed experts"));
  }
  const size_t lat = c.routed_expert_hidden_size,
               inter = c.moe_intermediate_size;
  // Group task indices by expert so each expert is read once per step.
  std::map<int, std::vector<size_t>> by_expert;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const ExpertTask& t = tasks[i];
    if (t.expert < 0 || t.expert >= c.num_experts || t.row < 0 ||
        t.row >= rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("expert task ", i, " (row ", t.row, ", expert ",
                       t.expert, ") out of range"));
    }
    by_expert[t.expert].push_back(i);
  }
  std::vector<float> task_out(tasks.size() * lat);
  std::vector<float> xin, h1, h3, act, y;
  for (const auto& [expert, idx] : by_expert) {
    const Expert& ex = experts_[layer][expert];
    const size_t n = idx.size();
    xin.resize(n * lat);
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(xin.data() + i * lat, z + tasks[idx[i]].row * lat,
                  lat * sizeof(float));
    }
    h1.resize(n * inter);
    h3.resize(n * inter);
    act.resize(n * inter);
    y.resize(n * lat);
    FLOTILLA_RETURN_IF_ERROR(Apply(ex.w[0], xin.data(), n, h1.data(), &buf_));
    FLOTILLA_RETURN_IF_ERROR(Apply(ex.w[2], xin.data(), n, h3.data(), &buf_));
    kernels::SituGlu(h1.data(), h3.data(), n * inter, c.situ_beta,
                     c.situ_linear_beta, act.data());
    FLOTILLA_RETURN_IF_ERROR(Apply(ex.w[1], act.data(), n, y.data(), &buf_));
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(task_out.data() + idx[i] * lat, y.data() + i * lat,
                  lat * sizeof(float));
    }
  }
  std::vector<double> acc;
  experts::CombineInTaskOrder(
      tasks.data(), tasks.size(), static_cast<size_t>(rows), lat,
      [&task_out, lat](size_t i) { return task_out.data() + i * lat; }, &acc,
      out);
  return absl::OkStatus();
}

}  // namespace flotilla::coordinator
