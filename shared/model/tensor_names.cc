#include "shared/model/tensor_names.h"

#include "absl/strings/numbers.h"

namespace flotilla::model {
namespace {

constexpr absl::string_view kExperts = ".block_sparse_moe.experts.";

// A decimal of 1 to 9 digits, nothing else.
bool Index(absl::string_view digits, int* out) {
  if (digits.empty() || digits.size() > 9) return false;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(digits, out);
}

}  // namespace

bool ParseExpertTensorName(absl::string_view name, ExpertTensorName* out) {
  const size_t mid = name.find(kExperts);
  if (mid == absl::string_view::npos) return false;
  const absl::string_view head = name.substr(0, mid);
  const size_t layers = head.rfind("layers.");
  if (layers == absl::string_view::npos ||
      (layers > 0 && head[layers - 1] != '.')) {
    return false;
  }
  ExpertTensorName n;
  if (!Index(head.substr(layers + 7), &n.layer)) return false;
  n.prefix = std::string(head.substr(0, layers));
  absl::string_view tail = name.substr(mid + kExperts.size());
  const size_t dot = tail.find('.');
  if (dot == absl::string_view::npos ||
      !Index(tail.substr(0, dot), &n.expert)) {
    return false;
  }
  tail = tail.substr(dot + 1);
  if (tail.empty()) return false;
  if (tail.size() >= 4 && tail[0] == 'w' && tail[1] >= '1' && tail[1] <= '3' &&
      tail[2] == '.') {
    n.which = tail[1] - '1';
    tail = tail.substr(3);
  }
  n.suffix = std::string(tail);
  *out = std::move(n);
  return true;
}

}  // namespace flotilla::model
