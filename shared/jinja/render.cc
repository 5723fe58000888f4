#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/jinja/builtins.h"
#include "shared/jinja/lexer.h"
#include "shared/jinja/parser.h"
#include "shared/jinja/render_internal.h"
#include "shared/jinja/template.h"

namespace flotilla::jinja {
namespace internal {

const Value* Scope::Lookup(const std::string& name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent) {
    for (const auto& [k, v] : s->vars) {
      if (k == name) return &v;
    }
  }
  return nullptr;
}

void Scope::Set(const std::string& name, Value v) {
  for (auto& [k, e] : vars) {
    if (k == name) {
      e = std::move(v);
      return;
    }
  }
  vars.emplace_back(name, std::move(v));
}

absl::Status AtLine(int line, const absl::Status& status) {
  if (status.ok() || status.GetPayload(kRaisedPayload).has_value() ||
      absl::StartsWith(status.message(), "template line ")) {
    return status;
  }
  return absl::Status(status.code(), absl::StrCat("template line ", line, ": ",
                                                  status.message()));
}

absl::Status Renderer::Step() {
  if (!budget_.Spend()) return budget_.status();
  return absl::OkStatus();
}

absl::StatusOr<Flow> Renderer::RenderBody(const Body& body, Scope* scope,
                                          std::string* out) {
  for (const NodePtr& n : body) {
    absl::StatusOr<Flow> flow = RenderNode(*n, scope, out);
    // A walk that ran out of budget stopped early with a partial result.
    if (flow.ok() && budget_.spent()) flow = budget_.status();
    if (!flow.ok()) return AtLine(n->line, flow.status());
    if (out->size() > options_.max_output_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "template output passed ", options_.max_output_bytes, " bytes"));
    }
    if (*flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

absl::Status Renderer::Assign(const Node& n, Value v, Scope* scope) {
  if (!n.attr.empty()) {
    const Value* target = scope->Lookup(n.targets[0]);
    if (target == nullptr || !target->is_namespace()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot assign attribute on non-namespace object '", n.targets[0],
          "'"));
    }
    target->Set(n.attr, std::move(v));
    return absl::OkStatus();
  }
  if (n.targets.size() == 1) {
    scope->Set(n.targets[0], std::move(v));
    return absl::OkStatus();
  }
  if (!v.is_list() || v.list().size() != n.targets.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot unpack ", v.TypeName(), " into ", n.targets.size(), " names"));
  }
  for (size_t i = 0; i < n.targets.size(); ++i) {
    scope->Set(n.targets[i], v.list()[i]);
  }
  return absl::OkStatus();
}

Value Renderer::MakeMacro(const Node& n) {
  return Value::MakeFunction(
      n.name, [this, &n](CallArgs& call) -> absl::StatusOr<Value> {
        if (call.positional.size() > n.params.size()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "macro '", n.name, "' takes not more than ", n.params.size(),
              " arguments"));
        }
        FLOTILLA_RETURN_IF_ERROR(Step());
        if (depth_ >= options_.max_depth) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "macro calls nested deeper than ", options_.max_depth));
        }
        Scope local;
        local.parent = root_;
        for (size_t i = 0; i < n.params.size(); ++i) {
          if (i < call.positional.size()) {
            local.Set(n.params[i], call.positional[i]);
          }
        }
        for (const auto& [k, v] : call.keyword) {
          const auto it = std::find(n.params.begin(), n.params.end(), k);
          if (it == n.params.end()) {
            return absl::InvalidArgumentError(absl::StrCat(
                "macro '", n.name, "' takes no keyword argument '", k, "'"));
          }
          local.Set(k, v);
        }
        for (size_t i = 0; i < n.params.size(); ++i) {
          bool bound = false;
          for (const auto& [k, v] : local.vars) bound |= k == n.params[i];
          if (bound) continue;
          Value dflt = Value::Undefined(n.params[i]);
          if (n.defaults[i] != nullptr) {
            FLOTILLA_ASSIGN_OR_RETURN(dflt, Eval(*n.defaults[i], &local));
          }
          local.Set(n.params[i], std::move(dflt));
        }
        std::string out;
        ++depth_;
        absl::StatusOr<Flow> flow = RenderBody(n.body, &local, &out);
        --depth_;
        if (!flow.ok()) return flow.status();
        return Value::String(std::move(out));
      });
}

absl::StatusOr<Flow> Renderer::RenderFor(const Node& n, Scope* scope,
                                         std::string* out) {
  FLOTILLA_ASSIGN_OR_RETURN(Value iterable, Eval(*n.expr, scope));
  FLOTILLA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(iterable));
  if (n.filter != nullptr) {
    std::vector<Value> kept;
    for (Value& item : items) {
      FLOTILLA_RETURN_IF_ERROR(Step());
      Scope probe;
      probe.parent = scope;
      Node bind;
      bind.targets = n.targets;
      FLOTILLA_RETURN_IF_ERROR(Assign(bind, item, &probe));
      FLOTILLA_ASSIGN_OR_RETURN(Value pass, Eval(*n.filter, &probe));
      if (pass.Truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  const int64_t length = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < length; ++i) {
    FLOTILLA_RETURN_IF_ERROR(Step());
    Scope iteration;
    iteration.parent = scope;
    Node bind;
    bind.targets = n.targets;
    FLOTILLA_RETURN_IF_ERROR(Assign(bind, items[i], &iteration));
    Value::Dict loop = {
        {"index", Value::Int(i + 1)},
        {"index0", Value::Int(i)},
        {"revindex", Value::Int(length - i)},
        {"revindex0", Value::Int(length - i - 1)},
        {"first", Value::Bool(i == 0)},
        {"last", Value::Bool(i == length - 1)},
        {"length", Value::Int(length)},
        {"depth", Value::Int(1)},
        {"depth0", Value::Int(0)},
    };
    if (i > 0) loop.emplace_back("previtem", items[i - 1]);
    if (i + 1 < length) loop.emplace_back("nextitem", items[i + 1]);
    loop.emplace_back("cycle", Value::MakeFunction(
                                   "loop.cycle",
                                   [i](CallArgs& call) -> absl::StatusOr<Value> {
                                     if (call.positional.empty()) {
                                       return absl::InvalidArgumentError(
                                           "loop.cycle() needs arguments");
                                     }
                                     return call.positional
                                         [i % call.positional.size()];
                                   }));
    iteration.Set("loop", Value::MakeDict(std::move(loop)));
    FLOTILLA_ASSIGN_OR_RETURN(Flow flow, RenderBody(n.body, &iteration, out));
    if (flow == Flow::kBreak) break;
  }
  if (length == 0 && !n.else_body.empty()) {
    return RenderBody(n.else_body, scope, out);
  }
  return Flow::kNormal;
}

absl::StatusOr<Flow> Renderer::RenderNode(const Node& n, Scope* scope,
                                          std::string* out) {
  switch (n.kind) {
    case Node::Kind::kText:
      *out += n.text;
      return Flow::kNormal;
    case Node::Kind::kOutput: {
      FLOTILLA_ASSIGN_OR_RETURN(Value v, Eval(*n.expr, scope));
      *out += v.Str();
      return Flow::kNormal;
    }
    case Node::Kind::kIf:
      for (const auto& [cond, body] : n.branches) {
        FLOTILLA_ASSIGN_OR_RETURN(Value c, Eval(*cond, scope));
        if (c.Truthy()) return RenderBody(body, scope, out);
      }
      return RenderBody(n.else_body, scope, out);
    case Node::Kind::kFor:
      return RenderFor(n, scope, out);
    case Node::Kind::kSet: {
      FLOTILLA_ASSIGN_OR_RETURN(Value v, Eval(*n.expr, scope));
      FLOTILLA_RETURN_IF_ERROR(Assign(n, std::move(v), scope));
      return Flow::kNormal;
    }
    case Node::Kind::kSetBlock: {
      std::string text;
      FLOTILLA_ASSIGN_OR_RETURN(Flow flow, RenderBody(n.body, scope, &text));
      (void)flow;
      scope->Set(n.targets[0], Value::String(std::move(text)));
      return Flow::kNormal;
    }
    case Node::Kind::kMacro:
      scope->Set(n.name, MakeMacro(n));
      return Flow::kNormal;
    case Node::Kind::kBreak:
      return Flow::kBreak;
    case Node::Kind::kContinue:
      return Flow::kContinue;
    case Node::Kind::kScope:
      return RenderBody(n.body, scope, out);
    case Node::Kind::kFilterBlock: {
      std::string text;
      FLOTILLA_ASSIGN_OR_RETURN(Flow flow, RenderBody(n.body, scope, &text));
      (void)flow;
      // The chain's innermost filter has no input: it takes the body.
      std::vector<const Expr*> chain;
      for (const Expr* f = n.filter.get(); f != nullptr;
           f = f->children[0].get()) {
        chain.push_back(f);
      }
      Value v = Value::String(std::move(text));
      for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
        FLOTILLA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(**it, 1, scope));
        FLOTILLA_ASSIGN_OR_RETURN(v, CallFilter((*it)->name, v, args));
      }
      *out += v.Str();
      return Flow::kNormal;
    }
  }
  return Flow::kNormal;
}

}  // namespace internal

absl::StatusOr<Template> Template::Parse(absl::string_view source) {
  FLOTILLA_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex(source));
  FLOTILLA_ASSIGN_OR_RETURN(Body body, jinja::Parse(tokens));
  Template t;
  t.body_ = std::make_shared<const Body>(std::move(body));
  return t;
}

absl::StatusOr<std::string> Template::Render(
    const Value& context, const RenderOptions& options) const {
  RenderOptions effective = options;
  if (effective.now == absl::InfinitePast()) effective.now = absl::Now();
  internal::Scope globals;
  const Value builtins = internal::MakeGlobals(effective.now, effective.zone);
  for (const auto& [k, v] : builtins.dict()) globals.Set(k, v);
  internal::Scope root;
  root.parent = &globals;
  if (context.is_dict()) {
    for (const auto& [k, v] : context.dict()) root.Set(k, v);
  } else if (!context.is_undefined() && !context.is_none()) {
    return absl::InvalidArgumentError("the render context must be a dict");
  }
  internal::Renderer renderer(effective, &root);
  std::string out;
  absl::StatusOr<internal::Flow> flow = renderer.RenderBody(*body_, &root, &out);
  if (!flow.ok()) return flow.status();
  return out;
}

bool IsRaisedError(const absl::Status& status) {
  return status.GetPayload(internal::kRaisedPayload).has_value();
}

}  // namespace flotilla::jinja
