// The work one render may do, counted where it is done. Loop iterations and
// macro calls take a step each, and so does every item that printing,
// comparing or serializing a value visits: a list that holds another list
// twice is walked twice, so a value that shares itself 64 levels deep
// (2^64 items when printed) runs out of steps instead of running forever.
// Walks also stop past a nesting depth (a namespace that holds itself) and
// past a byte count.
//
// Value's methods (Str, Repr, Equals, ToJson, PythonJsonDumps) return their
// usual results, so the budget is the one of the render running on this
// thread (ScopedBudget installs it); they stop early once it is spent, and
// the renderer turns the spent budget into a ResourceExhausted error naming
// the limit. Outside a render nothing is counted.
#ifndef FLOTILLA_SHARED_JINJA_BUDGET_H_
#define FLOTILLA_SHARED_JINJA_BUDGET_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"

namespace flotilla::jinja {

class Budget {
 public:
  Budget(int64_t max_steps, size_t max_bytes, int max_nesting)
      : max_steps_(max_steps),
        max_bytes_(max_bytes),
        max_nesting_(max_nesting) {}

  // Takes `n` steps; false (and spent from now on) when that passes the cap.
  bool Spend(int64_t n = 1);
  // False (and spent) when `bytes` passes the byte cap.
  bool FitsBytes(size_t bytes);
  // Enter/Leave bracket one level of a walk into a value; Enter is false
  // (and the budget spent) past the nesting cap.
  bool Enter();
  void Leave() { --nesting_; }

  bool spent() const { return !error_.ok(); }
  // OK, or the ResourceExhausted error of the first limit passed.
  const absl::Status& status() const { return error_; }
  int64_t steps() const { return steps_; }

  // Runs `f` when the budget (the render) ends.
  void AtEnd(std::function<void()> f) { at_end_.push_back(std::move(f)); }
  ~Budget() {
    for (auto& f : at_end_) f();
  }
  Budget(const Budget&) = delete;
  Budget& operator=(const Budget&) = delete;

  // The budget installed on this thread, or null outside a render.
  static Budget* Current();

 private:
  const int64_t max_steps_;
  const size_t max_bytes_;
  const int max_nesting_;
  int64_t steps_ = 0;
  int nesting_ = 0;
  absl::Status error_;
  std::vector<std::function<void()>> at_end_;
};

// Installs `budget` as this thread's for its lifetime (renders nest: a
// macro's body renders inside its caller, under the same budget).
class ScopedBudget {
 public:
  explicit ScopedBudget(Budget* budget);
  ~ScopedBudget();
  ScopedBudget(const ScopedBudget&) = delete;
  ScopedBudget& operator=(const ScopedBudget&) = delete;

 private:
  Budget* previous_;
};

// One level of a walk into a value, charged to this thread's budget (if
// any): ok() is false when the walk must stop (the budget is spent).
class WalkLevel {
 public:
  WalkLevel() : budget_(Budget::Current()) {
    if (budget_ != nullptr) ok_ = budget_->Enter() && budget_->Spend();
  }
  ~WalkLevel() {
    if (budget_ != nullptr) budget_->Leave();
  }
  WalkLevel(const WalkLevel&) = delete;
  WalkLevel& operator=(const WalkLevel&) = delete;

  bool ok() const { return ok_; }
  // False (the walk must stop) once `bytes` of output pass the byte cap.
  bool Fits(size_t bytes) const {
    return budget_ == nullptr || budget_->FitsBytes(bytes);
  }

 private:
  Budget* budget_;
  bool ok_ = true;
};

}  // namespace flotilla::jinja

#endif  // FLOTILLA_SHARED_JINJA_BUDGET_H_
