// The values a Jinja template computes with, with Python's semantics where
// chat templates can see them: lists and dicts are shared by reference (a
// namespace's attributes change in place), dicts keep insertion order,
// printing a value gives Python's str() (`None`, `True`, `['a', 1]`), and
// `tojson` gives json.dumps with transformers' arguments. Undefined is its
// own kind, as in Jinja: it prints as nothing, is false, and fails when
// looked into.
#ifndef FLOTILLA_SHARED_JINJA_VALUE_H_
#define FLOTILLA_SHARED_JINJA_VALUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace flotilla::jinja {

class Value;

// Arguments of a call: positional, then keyword (in the order written).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using Function = std::function<absl::StatusOr<Value>(CallArgs&)>;

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,   // also tuples (is_tuple())
    kDict,   // also namespaces (is_namespace())
    kFunction,
  };
  using List = std::vector<Value>;
  using Dict = std::vector<std::pair<std::string, Value>>;

  Value() = default;  // undefined
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value String(std::string s);
  static Value MakeList(List items = {}, bool tuple = false);
  static Value MakeDict(Dict items = {}, bool is_namespace = false);
  static Value MakeFunction(std::string name, Function f);
  // Undefined remembering the name it was looked up by, for error messages.
  static Value Undefined(std::string hint);

  static Value FromJson(const nlohmann::ordered_json& j);
  // JSON for this value; InvalidArgument for functions and undefined.
  absl::StatusOr<nlohmann::ordered_json> ToJson() const;

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return is_list() && flag_; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return is_dict() && flag_; }
  bool is_function() const { return kind_ == Kind::kFunction; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }
  double as_number() const { return is_float() ? float_ : double(int_); }
  const std::string& as_string() const { return text(); }
  List& list() const { return *list_; }
  Dict& dict() const { return *dict_; }
  const Function& function() const { return *function_; }
  // Name of the function, or the name an undefined was looked up by.
  const std::string& name() const { return text(); }

  // Dict entry by key; null when absent.
  const Value* Find(const std::string& key) const;
  // Sets a dict entry, keeping the first position of an existing key.
  void Set(const std::string& key, Value v) const;

  // Python truthiness (undefined is false).
  bool Truthy() const;
  // Python's str(): what {{ value }} prints. Undefined prints as "".
  std::string Str() const;
  // Python's repr(): how values inside lists and dicts print.
  std::string Repr() const;
  // Python ==, with 1 == 1.0 and deep list/dict comparison.
  bool Equals(const Value& other) const;
  // A short name of the kind for error messages ("string", "list", ...).
  std::string TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool flag_ = false;  // tuple / namespace
  int64_t int_ = 0;    // bool and int
  double float_ = 0;
  // The string, or a function's or an undefined's name; shared, so that
  // copying a value (a lookup, a list of one string a million times) never
  // copies its text. Null means "".
  std::shared_ptr<const std::string> string_;
  const std::string& text() const;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Function> function_;
};

// Python's repr() of a float ("1.0", "0.1", "1e-05", "1e+16", "inf").
std::string PythonFloatRepr(double d);

// json.dumps(value, ensure_ascii, indent, separators, sort_keys) as
// transformers' `tojson` filter calls it. indent < 0 means None.
absl::StatusOr<std::string> PythonJsonDumps(const Value& v, bool ensure_ascii,
                                            int indent, bool sort_keys);

}  // namespace flotilla::jinja

#endif  // FLOTILLA_SHARED_JINJA_VALUE_H_
