#include "shared/experts/in_memory_experts.h"

#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/experts/combine.h"
#include "shared/experts/expert_codec.h"

namespace flotilla::experts {

absl::StatusOr<std::unique_ptr<InMemoryExperts>> InMemoryExperts::Create(
    const model::TensorSource* source, const model::MoeSpec& config,
    kernels::ThreadPool* pool, int only_layer, bool resident) {
  auto experts =
      std::unique_ptr<InMemoryExperts>(new InMemoryExperts(source, config));
  FLOTILLA_RETURN_IF_ERROR(experts->Bind(only_layer, pool));
  if (resident) FLOTILLA_RETURN_IF_ERROR(experts->ReadAll());
  return experts;
}

absl::Status InMemoryExperts::ReadAll() {
  runs_.resize(experts_.size());
  locations_.resize(experts_.size());
  for (size_t layer = 0; layer < experts_.size(); ++layer) {
    for (const ExpertTensors& t : experts_[layer]) {
      ExpertLocation loc;
      FLOTILLA_RETURN_IF_ERROR(ReadRun(t, &loc));
      runs_[layer].emplace_back(run_.begin(), run_.begin() + loc.length);
      locations_[layer].push_back(loc);
    }
  }
  run_ = std::vector<uint8_t>();
  return absl::OkStatus();
}

absl::Status InMemoryExperts::Bind(int only_layer, kernels::ThreadPool* pool) {
  const model::MoeSpec& c = config_;
  experts_.resize(c.num_layers);
  const ExpertTensors* first = nullptr;
  for (int layer = 0; layer < c.num_layers; ++layer) {
    if (c.IsDenseLayer(layer)) continue;
    if (only_layer >= 0 && layer != only_layer) continue;
    experts_[layer].reserve(c.num_experts);
    for (int e = 0; e < c.num_experts; ++e) {
      const ExpertKey key{layer, e};
      FLOTILLA_ASSIGN_OR_RETURN(
          ExpertTensors t,
          CheckExpertTensors(
              FindExpertTensors(*source_, c.expert_names, layer, e), key));
      FLOTILLA_RETURN_IF_ERROR(CheckExpertShapes(t, c, key));
      experts_[layer].push_back(std::move(t));
      if (first == nullptr) first = &experts_[layer].back();
      if (experts_[layer].back().format != first->format) {
        return absl::InvalidArgumentError(absl::StrCat(
            "layer ", layer, " expert ", e, " is ",
            ExpertFormatName(experts_[layer].back().format),
            " but earlier experts are ", ExpertFormatName(first->format),
            "; one checkpoint has one expert format"));
      }
    }
  }
  if (first == nullptr) return absl::OkStatus();  // no routed experts bound
  FLOTILLA_ASSIGN_OR_RETURN(
      executor_, ExpertExecutor::ForShapes(first->format, first->shapes,
                                           c.Activation(), pool));
  return absl::OkStatus();
}

absl::Status InMemoryExperts::ReadRun(const ExpertTensors& tensors,
                                      ExpertLocation* loc) {
  // Each part at a 16-byte-aligned offset, as the kernels read it.
  uint64_t length = 0;
  for (size_t i = 0; i < tensors.parts.size(); ++i) {
    length = (length + 15) / 16 * 16;
    loc->tensor_offsets[i] = length;
    length += tensors.parts[i]->nbytes;
  }
  if (run_.size() < length) run_.resize(length);
  for (size_t i = 0; i < tensors.parts.size(); ++i) {
    FLOTILLA_RETURN_IF_ERROR(source_->ReadRaw(
        *tensors.parts[i], run_.data() + loc->tensor_offsets[i]));
    bytes_read_ += tensors.parts[i]->nbytes;
  }
  FLOTILLA_RETURN_IF_ERROR(base::WithContext(
      CheckRunValues(CodecOf(tensors.format), run_.data(),
                     loc->tensor_offsets.data(), tensors.shapes),
      absl::StrCat("expert ", tensors.parts[0]->name)));
  loc->present = true;
  loc->length = length;
  return absl::OkStatus();
}

absl::Status InMemoryExperts::ComputeLayer(int layer, const float* z, int rows,
                                           const ExpertAssignment* tasks,
                                           size_t num_tasks, float* out) {
  const model::MoeSpec& c = config_;
  if (layer < 0 || layer >= c.num_layers || experts_[layer].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, " has no routed experts"));
  }
  const size_t lat = c.hidden_size;
  // Group task indices by expert so each expert is read once per step.
  std::map<int, std::vector<size_t>> by_expert;
  for (size_t i = 0; i < num_tasks; ++i) {
    const ExpertAssignment& t = tasks[i];
    if (t.expert < 0 || t.expert >= c.num_experts || t.row < 0 ||
        t.row >= rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("expert task ", i, " (row ", t.row, ", expert ",
                       t.expert, ") out of range"));
    }
    by_expert[t.expert].push_back(i);
  }
  std::vector<float> task_out(num_tasks * lat);
  std::vector<float> xin, y;
  for (const auto& [expert, idx] : by_expert) {
    const size_t n = idx.size();
    xin.resize(n * lat);
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(xin.data() + i * lat, z + tasks[idx[i]].row * lat,
                  lat * sizeof(float));
    }
    y.resize(n * lat);
    if (!runs_.empty()) {
      executor_->Compute(locations_[layer][expert], runs_[layer][expert].data(),
                         xin.data(), n, y.data());
    } else {
      ExpertLocation loc;
      FLOTILLA_RETURN_IF_ERROR(ReadRun(experts_[layer][expert], &loc));
      executor_->Compute(loc, run_.data(), xin.data(), n, y.data());
    }
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(task_out.data() + idx[i] * lat, y.data() + i * lat,
                  lat * sizeof(float));
    }
  }
  std::vector<double> acc;
  CombineInTaskOrder(
      tasks, num_tasks, static_cast<size_t>(rows), lat,
      [&task_out, lat](size_t i) { return task_out.data() + i * lat; }, &acc,
      out);
  return absl::OkStatus();
}

}  // namespace flotilla::experts
