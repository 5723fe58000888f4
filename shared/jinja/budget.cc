#include "shared/jinja/budget.h"

#include "absl/strings/str_cat.h"

namespace flotilla::jinja {
namespace {

thread_local Budget* current_budget = nullptr;

}  // namespace

bool Budget::Spend(int64_t n) {
  if (spent()) return false;
  steps_ += n;
  if (steps_ > max_steps_) {
    error_ = absl::ResourceExhaustedError(absl::StrCat(
        "the template took more than ", max_steps_,
        " steps (loop iterations, macro calls and items printed, compared "
        "or serialized)"));
    return false;
  }
  return true;
}

bool Budget::FitsBytes(size_t bytes) {
  if (spent()) return false;
  if (bytes > max_bytes_) {
    error_ = absl::ResourceExhaustedError(
        absl::StrCat("a value printed or serialized by the template passed ",
                     max_bytes_, " bytes"));
    return false;
  }
  return true;
}

bool Budget::Enter() {
  ++nesting_;
  if (spent()) return false;
  if (nesting_ > max_nesting_) {
    error_ = absl::ResourceExhaustedError(absl::StrCat(
        "a value printed, compared or serialized by the template nests "
        "deeper than ",
        max_nesting_, " levels (or contains itself)"));
    return false;
  }
  return true;
}

Budget* Budget::Current() { return current_budget; }

ScopedBudget::ScopedBudget(Budget* budget) : previous_(current_budget) {
  current_budget = budget;
}

ScopedBudget::~ScopedBudget() { current_budget = previous_; }

}  // namespace flotilla::jinja
