#include "shared/experts/expert_engine.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/experts/combine.h"
#include "shared/io/aligned_buffer.h"

namespace flotilla::experts {

absl::StatusOr<std::unique_ptr<ExpertEngine>> ExpertEngine::Create(
    ExpertIndex index, const model::GluActivation& act,
    kernels::ThreadPool* pool, const ExpertEngineOptions& options) {
  auto engine = std::unique_ptr<ExpertEngine>(new ExpertEngine());
  engine->index_ = std::make_unique<ExpertIndex>(std::move(index));
  if (options.sliced_intermediate > 0) {
    FLOTILLA_ASSIGN_OR_RETURN(
        engine->executor_,
        ExpertExecutor::CreateSliced(*engine->index_,
                                     options.sliced_intermediate, act, pool));
  } else {
    FLOTILLA_ASSIGN_OR_RETURN(
        engine->executor_, ExpertExecutor::Create(*engine->index_, act, pool));
  }
  FetcherOptions fo = options.fetcher;
  if (fo.pool == nullptr) fo.pool = pool;
  if (options.cache_bytes > 0) {
    // The fetcher's slot size (ExpertFetcher::slot_bytes()).
    const uint64_t slot = std::max<uint64_t>(
        engine->index_->max_aligned_run_bytes(), io::kDirectIoAlignment);
    fo.cache_slots = static_cast<int>(
        std::min<uint64_t>(options.cache_bytes / slot, 1u << 20));
  }
  FLOTILLA_ASSIGN_OR_RETURN(engine->fetcher_,
                            ExpertFetcher::Create(engine->index_.get(), fo));
  return engine;
}

absl::Status ExpertEngine::ComputeLayer(
    int layer, const float* z, int rows, const ExpertAssignment* tasks,
    size_t num_tasks, float* out, const std::vector<ExpertKey>* lookahead) {
  const size_t lat = executor_->latent();
  task_out_.resize(num_tasks * lat);
  FLOTILLA_RETURN_IF_ERROR(ComputeTasks(ExpertPhase::kWhole, layer, z, rows,
                                        tasks, num_tasks, task_out_.data(),
                                        lookahead));
  // Whatever order the experts completed in (combine.h).
  CombineInTaskOrder(
      tasks, num_tasks, static_cast<size_t>(rows), lat,
      [this, lat](size_t i) { return task_out_.data() + i * lat; }, &acc_, out);
  return absl::OkStatus();
}

size_t ExpertEngine::InWidth(ExpertPhase phase) const {
  return phase == ExpertPhase::kDown ? executor_->down_cols()
                                     : executor_->latent();
}

size_t ExpertEngine::OutWidth(ExpertPhase phase) const {
  switch (phase) {
    case ExpertPhase::kWhole:
      return executor_->latent();
    case ExpertPhase::kGateUp:
      return executor_->intermediate();
    case ExpertPhase::kDown:
      return executor_->down_rows();
  }
  return 0;
}

absl::Status ExpertEngine::ComputeTasks(
    ExpertPhase phase, int layer, const float* in, int rows,
    const ExpertAssignment* tasks, size_t num_tasks, float* task_out,
    const std::vector<ExpertKey>* lookahead) {
  // The slice phases work on whole experts too (one slice of one).
  if (phase == ExpertPhase::kWhole && executor_->sliced()) {
    return absl::FailedPreconditionError(
        "this index holds row slices of experts: only the gate/up and down "
        "phases can be computed");
  }
  if (!index_->HasLayer(layer)) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, " has no routed experts"));
  }
  if (rows < 0) {
    return absl::InvalidArgumentError(absl::StrCat("negative rows ", rows));
  }
  const int num_experts = index_->num_experts();
  // Counting sort of task indices by expert: stable, so each expert's rows
  // stay in task order (the order LocalExperts uses).
  group_begin_.assign(num_experts + 1, 0);
  for (size_t i = 0; i < num_tasks; ++i) {
    const ExpertAssignment& t = tasks[i];
    if (t.expert < 0 || t.expert >= num_experts || t.row < 0 || t.row >= rows ||
        index_->Find(ExpertKey{layer, t.expert}) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("expert task ", i, " (row ", t.row, ", expert ",
                       t.expert, ") out of range"));
    }
    ++group_begin_[t.expert + 1];
  }
  keys_.clear();
  size_t largest = 0;
  for (int e = 0; e < num_experts; ++e) {
    const uint32_t count = group_begin_[e + 1];
    if (count > 0) keys_.push_back(ExpertKey{layer, e});
    largest = std::max<size_t>(largest, count);
    group_begin_[e + 1] += group_begin_[e];
  }
  order_.resize(num_tasks);
  {
    // Fill using a moving cursor per expert; group_begin_ is restored after.
    for (size_t i = 0; i < num_tasks; ++i) {
      order_[group_begin_[tasks[i].expert]++] = static_cast<uint32_t>(i);
    }
    for (int e = num_experts; e > 0; --e) group_begin_[e] = group_begin_[e - 1];
    group_begin_[0] = 0;
  }
  if (xin_.size() < largest * InWidth(phase)) {
    xin_.resize(largest * InWidth(phase));
  }
  if (y_.size() < largest * OutWidth(phase)) {
    y_.resize(largest * OutWidth(phase));
  }

  phase_ = phase;
  z_ = in;
  tasks_ = tasks;
  task_out_ptr_ = task_out;
  // Captures only `this`, so std::function stores it without allocating.
  auto on_ready = [this](const ExpertKey& key, const uint8_t* run) {
    return OnReady(key, run);
  };
  return fetcher_->Fetch(keys_, on_ready, lookahead);
}

uint64_t ExpertEngine::ScratchBytesFor(size_t rows, size_t num_tasks) const {
  // The widest row of any phase (the down phase reads [I] rows).
  const uint64_t lat =
      std::max<uint64_t>(executor_->latent(), executor_->down_cols());
  const uint64_t n = num_tasks;
  // order_, xin_ + y_ (one expert's rows: at most every task), task_out_,
  // acc_ (double), group_begin_ and keys_.
  return n * sizeof(uint32_t) + 2 * n * lat * sizeof(float) +
         n * lat * sizeof(float) + rows * lat * sizeof(double) +
         (index_->num_experts() + 1) * (sizeof(uint32_t) + sizeof(ExpertKey));
}

uint64_t ExpertEngine::scratch_bytes() const {
  return group_begin_.capacity() * sizeof(uint32_t) +
         order_.capacity() * sizeof(uint32_t) +
         keys_.capacity() * sizeof(ExpertKey) +
         (xin_.capacity() + y_.capacity() + task_out_.capacity()) *
             sizeof(float) +
         acc_.capacity() * sizeof(double);
}

void ExpertEngine::TrimScratch(uint64_t keep_bytes) {
  if (scratch_bytes() <= keep_bytes) return;
  // Swapping with empty vectors really frees (shrink_to_fit may not).
  std::vector<uint32_t>().swap(order_);
  std::vector<float>().swap(xin_);
  std::vector<float>().swap(y_);
  std::vector<float>().swap(task_out_);
  std::vector<double>().swap(acc_);
}

absl::Status ExpertEngine::OnReady(const ExpertKey& key, const uint8_t* run) {
  const size_t in_w = InWidth(phase_), out_w = OutWidth(phase_);
  const uint32_t begin = group_begin_[key.expert];
  const size_t n = group_begin_[key.expert + 1] - begin;
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(xin_.data() + i * in_w,
                z_ + static_cast<size_t>(tasks_[order_[begin + i]].row) * in_w,
                in_w * sizeof(float));
  }
  const ExpertLocation& loc = *index_->Find(key);
  switch (phase_) {
    case ExpertPhase::kWhole:
      executor_->Compute(loc, run, xin_.data(), n, y_.data());
      break;
    case ExpertPhase::kGateUp:
      executor_->GateUp(loc, run, xin_.data(), n, y_.data());
      break;
    case ExpertPhase::kDown:
      executor_->Down(loc, run, xin_.data(), n, y_.data());
      break;
  }
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(task_out_ptr_ + order_[begin + i] * out_w,
                y_.data() + i * out_w, out_w * sizeof(float));
  }
  return absl::OkStatus();
}

}  // namespace flotilla::experts
