// The parsed form of a template: statements (Node) holding expressions
// (Expr). Children are owned; a macro value points into the tree, so a
// Template outlives every render of it.
#ifndef FLOTILLA_SHARED_JINJA_AST_H_
#define FLOTILLA_SHARED_JINJA_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "shared/jinja/value.h"

namespace flotilla::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // literal
    kName,     // name
    kList,     // children
    kTuple,    // children
    kDict,     // children: key, value, key, value, ...
    kAttr,     // children[0].name
    kItem,     // children[0][children[1]]
    kSlice,    // children[0][children[1]:children[2]:children[3]], null = absent
    kCall,     // children[0](children[1..], kwargs)
    kFilter,   // children[0] | name(children[1..], kwargs); children[0] may
               // be null inside {% filter %}
    kTest,     // children[0] is [not] name(children[1..])
    kUnary,    // name: "-", "+", "not"
    kBinary,   // name: + - * / // % ** ~ and or
    kCompare,  // children[0] ops[0] children[1] ops[1] children[2] ...
    kCond,     // children[0] if children[1] else children[2] (null: none)
  };
  Kind kind;
  int line = 0;
  Value literal;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  // Levels from here to the deepest leaf (1 for a leaf): the parser
  // refuses expressions past a height, so evaluating or freeing one never
  // recurses without bound.
  int height = 1;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // branches, else_body
    kFor,       // for targets in expr [if filter] body [else else_body]
    kSet,       // set targets = expr, or set targets[0].attr = expr
    kSetBlock,  // set targets[0] %}body{% endset
    kMacro,     // macro name(params=defaults) body
    kBreak,
    kContinue,
    kFilterBlock,  // filter expr (a kFilter with no input) body
    kScope,        // a body rendered in place ({% generation %})
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<std::string> targets;
  std::string attr;  // kSet on a namespace attribute
  std::string name;  // kMacro
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // per param; null when none
};

}  // namespace flotilla::jinja

#endif  // FLOTILLA_SHARED_JINJA_AST_H_
