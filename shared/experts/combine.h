// The combine rule every expert backend follows (docs/architecture.md): a
// row's output is the sum over its (row, expert, weight) tasks, IN TASK
// ORDER, of weight * expert_output, accumulated in double and rounded to
// float once. Whoever computes the experts (this process, a slot pool
// filled in completion order, or remote workers), the same tasks give the
// same bits.
#ifndef FLOTILLA_SHARED_EXPERTS_COMBINE_H_
#define FLOTILLA_SHARED_EXPERTS_COMBINE_H_

#include <cstddef>
#include <vector>

namespace flotilla::experts {

// acc[j] += weight * v[j] for j < width, in double.
inline void AccumulateWeighted(double* acc, const float* v, double weight,
                               size_t width) {
  for (size_t j = 0; j < width; ++j) acc[j] += weight * v[j];
}

// out[rows][width] = the task-order combine of per-task outputs
// (output_of(i) -> const float* of task i's [width] output). `Task` has
// `row` and `weight`. `acc` is scratch (reused across calls).
template <typename Task, typename OutputOf>
void CombineInTaskOrder(const Task* tasks, size_t num_tasks, size_t rows,
                        size_t width, OutputOf output_of,
                        std::vector<double>* acc, float* out) {
  acc->assign(rows * width, 0.0);
  for (size_t i = 0; i < num_tasks; ++i) {
    AccumulateWeighted(acc->data() + static_cast<size_t>(tasks[i].row) * width,
                       output_of(i), tasks[i].weight, width);
  }
  for (size_t i = 0; i < acc->size(); ++i) {
    out[i] = static_cast<float>((*acc)[i]);
  }
}

}  // namespace flotilla::experts

#endif  // FLOTILLA_SHARED_EXPERTS_COMBINE_H_
