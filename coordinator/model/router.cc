#include "coordinator/model/router.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "shared/kernels/kernels.h"

namespace flotilla::coordinator {
namespace {

// The top `k` of `score` (biased by `biased` when given), ties to the lower
// index, into order[0..k).
template <typename T>
void TopK(const T* score, int n, int k, std::vector<int>* order) {
  order->resize(n);
  std::iota(order->begin(), order->end(), 0);
  std::partial_sort(order->begin(), order->begin() + k, order->end(),
                    [score](int a, int b) {
                      return score[a] != score[b] ? score[a] > score[b] : a < b;
                    });
}

void RouteSigmoid(const RouterSpec& spec, const float* logits,
                  const float* bias, int32_t row, std::vector<int>* order,
                  std::vector<ExpertTask>* tasks) {
  const int n = spec.num_experts, k = spec.top_k;
  std::vector<double> s(n), biased(n);
  for (int i = 0; i < n; ++i) {
    s[i] = 1.0 / (1.0 + std::exp(-static_cast<double>(logits[i])));
    biased[i] = s[i] + (bias != nullptr ? bias[i] : 0.0f);
  }
  if (spec.num_groups > 1) {
    const int size = n / spec.num_groups;
    std::vector<double> group(spec.num_groups);
    for (int g = 0; g < spec.num_groups; ++g) {
      const double* b = biased.data() + g * size;
      // The sum of the group's two largest (size >= 2, checked by the
      // family's config).
      double first = std::max(b[0], b[1]), second = std::min(b[0], b[1]);
      for (int i = 2; i < size; ++i) {
        if (b[i] > first) {
          second = first;
          first = b[i];
        } else if (b[i] > second) {
          second = b[i];
        }
      }
      group[g] = first + second;
    }
    std::vector<int> kept;
    TopK(group.data(), spec.num_groups, spec.top_groups, &kept);
    std::vector<char> keep(spec.num_groups, 0);
    for (int j = 0; j < spec.top_groups; ++j) keep[kept[j]] = 1;
    for (int i = 0; i < n; ++i) {
      if (!keep[i / size]) biased[i] = 0.0;
    }
  }
  TopK(biased.data(), n, k, order);
  double sum = 0;
  for (int j = 0; j < k; ++j) sum += s[(*order)[j]];
  for (int j = 0; j < k; ++j) {
    double w = s[(*order)[j]];
    if (spec.renormalize) w = w / (sum + spec.renormalize_epsilon);
    tasks->push_back(
        ExpertTask{row, (*order)[j], static_cast<float>(w * spec.scaling)});
  }
}

void RouteSoftmax(const RouterSpec& spec, const float* logits,
                  const float* bias, int32_t row, std::vector<int>* order,
                  std::vector<float>* p, std::vector<ExpertTask>* tasks) {
  const int n = spec.num_experts, k = spec.top_k;
  p->assign(logits, logits + n);
  kernels::Softmax(p->data(), n);
  std::vector<float> choice;
  const float* score = p->data();
  if (bias != nullptr) {
    choice.resize(n);
    for (int i = 0; i < n; ++i) choice[i] = (*p)[i] + bias[i];
    score = choice.data();
  }
  TopK(score, n, k, order);
  float sum = 0;
  for (int j = 0; j < k; ++j) sum += (*p)[(*order)[j]];
  for (int j = 0; j < k; ++j) {
    float w = (*p)[(*order)[j]];
    if (spec.renormalize) {
      w = static_cast<float>(w / (sum + spec.renormalize_epsilon));
    }
    tasks->push_back(ExpertTask{row, (*order)[j], w * spec.scaling});
  }
}

// gpt-oss: the top k by logit (bias, when given, already added by the
// caller into the logits: it is part of them), then a softmax over those k
// logits only, in float as upstream.
void RouteTopKSoftmax(const RouterSpec& spec, const float* logits, int32_t row,
                      std::vector<int>* order, std::vector<float>* p,
                      std::vector<ExpertTask>* tasks) {
  const int n = spec.num_experts, k = spec.top_k;
  TopK(logits, n, k, order);
  p->resize(k);
  for (int j = 0; j < k; ++j) (*p)[j] = logits[(*order)[j]];
  kernels::Softmax(p->data(), k);
  for (int j = 0; j < k; ++j) {
    tasks->push_back(ExpertTask{row, (*order)[j], (*p)[j] * spec.scaling});
  }
}

}  // namespace

void Route(const RouterSpec& spec, const float* logits, const float* bias,
           size_t rows, std::vector<ExpertTask>* tasks) {
  std::vector<int> order;
  std::vector<float> p;
  tasks->reserve(tasks->size() + rows * spec.top_k);
  for (size_t r = 0; r < rows; ++r) {
    const float* row = logits + r * spec.num_experts;
    if (spec.scoring == RouterSpec::Scoring::kSigmoid) {
      RouteSigmoid(spec, row, bias, static_cast<int32_t>(r), &order, tasks);
    } else if (spec.scoring == RouterSpec::Scoring::kTopKSoftmax) {
      RouteTopKSoftmax(spec, row, static_cast<int32_t>(r), &order, &p, tasks);
    } else {
      RouteSoftmax(spec, row, bias, static_cast<int32_t>(r), &order, &p, tasks);
    }
  }
}

}  // namespace flotilla::coordinator
