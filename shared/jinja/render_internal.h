// The tree walker behind Template::Render: statements in render.cc,
// expressions in eval.cc.
#ifndef FLOTILLA_SHARED_JINJA_RENDER_INTERNAL_H_
#define FLOTILLA_SHARED_JINJA_RENDER_INTERNAL_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/jinja/ast.h"
#include "shared/jinja/budget.h"
#include "shared/jinja/template.h"
#include "shared/jinja/value.h"

namespace flotilla::jinja::internal {

// Variables of one frame: the template's top level, a macro call, or one
// iteration of a for loop (Jinja gives each iteration fresh locals). Names
// not set here are read from the parent, so a macro sees the top level's
// variables as they are when it is called.
struct Scope {
  Scope* parent = nullptr;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* Lookup(const std::string& name) const;
  void Set(const std::string& name, Value v);
};

enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  Renderer(const RenderOptions& options, Scope* root)
      : options_(options),
        root_(root),
        budget_(options.max_steps, options.max_output_bytes,
                options.max_value_nesting),
        install_(&budget_) {}

  absl::StatusOr<Flow> RenderBody(const Body& body, Scope* scope,
                                  std::string* out);
  // Evaluates `e`, bounded in depth; the budget's error once it is spent.
  absl::StatusOr<Value> Eval(const Expr& e, Scope* scope);

 private:
  absl::StatusOr<Value> EvalNode(const Expr& e, Scope* scope);
  absl::StatusOr<Flow> RenderNode(const Node& n, Scope* scope,
                                  std::string* out);
  absl::StatusOr<Flow> RenderFor(const Node& n, Scope* scope, std::string* out);
  absl::Status Assign(const Node& n, Value v, Scope* scope);
  Value MakeMacro(const Node& n);

  absl::StatusOr<Value> EvalBinary(const Expr& e, Scope* scope);
  absl::StatusOr<Value> EvalCompare(const Expr& e, Scope* scope);
  absl::StatusOr<CallArgs> EvalArgs(const Expr& e, size_t first,
                                    Scope* scope);
  absl::StatusOr<Value> EvalCall(const Expr& e, Scope* scope);
  // `v`, after charging the budget for what building it copied.
  absl::StatusOr<Value> Charged(Value v);

  const RenderOptions& options_;
  Scope* root_;
  int depth_ = 0;       // macro calls open now
  int eval_depth_ = 0;  // Eval calls open now, across macro calls
  Budget budget_;
  ScopedBudget install_;  // budget_ is this thread's while rendering
  // One loop iteration or macro call: ResourceExhausted once the render
  // has spent its budget.
  absl::Status Step();
};

// Line-numbered error for an expression or statement.
absl::Status AtLine(int line, const absl::Status& status);

}  // namespace flotilla::jinja::internal

#endif  // FLOTILLA_SHARED_JINJA_RENDER_INTERNAL_H_
