#include "shared/model/tensor_names.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace flotilla::model {
namespace {

// A decimal of 1 to 9 digits, nothing else.
bool Index(absl::string_view digits, int* out) {
  if (digits.empty() || digits.size() > 9) return false;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(digits, out);
}

// `name` as `scheme` spells an expert tensor.
bool ParseWith(absl::string_view name, const ExpertScheme* scheme,
               ExpertTensorName* out) {
  const std::string infix = absl::StrCat(".", scheme->experts);
  const size_t mid = name.find(infix);
  if (mid == absl::string_view::npos) return false;
  const absl::string_view head = name.substr(0, mid);
  const size_t layers = head.rfind("layers.");
  if (layers == absl::string_view::npos ||
      (layers > 0 && head[layers - 1] != '.')) {
    return false;
  }
  ExpertTensorName n;
  if (!Index(head.substr(layers + 7), &n.layer)) return false;
  n.naming.prefix = std::string(head.substr(0, layers));
  n.naming.scheme = scheme;
  absl::string_view tail = name.substr(mid + infix.size());
  const size_t dot = tail.find('.');
  if (dot == absl::string_view::npos ||
      !Index(tail.substr(0, dot), &n.expert)) {
    return false;
  }
  tail = tail.substr(dot + 1);
  if (tail.empty()) return false;
  for (int w = 0; w < 3; ++w) {
    const absl::string_view m = scheme->matrices[w];
    if (tail.size() > m.size() + 1 && absl::StartsWith(tail, m) &&
        tail[m.size()] == '.') {
      n.which = w;
      tail = tail.substr(m.size() + 1);
      break;
    }
  }
  n.suffix = std::string(tail);
  *out = std::move(n);
  return true;
}

}  // namespace

bool ParseExpertTensorName(absl::string_view name, ExpertTensorName* out) {
  for (const ExpertScheme* scheme : kExpertSchemes) {
    if (ParseWith(name, scheme, out)) return true;
  }
  return false;
}

}  // namespace flotilla::model
