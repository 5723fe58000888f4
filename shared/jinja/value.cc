#include "shared/jinja/value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "shared/jinja/budget.h"

namespace flotilla::jinja {

const std::string& Value::text() const {
  static const std::string* const kEmpty = new std::string();
  return string_ != nullptr ? *string_ : *kEmpty;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.int_ = b ? 1 : 0;
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.int_ = i;
  return v;
}

Value Value::Float(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.float_ = d;
  return v;
}

Value Value::String(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.string_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::MakeList(List items, bool tuple) {
  Value v;
  v.kind_ = Kind::kList;
  v.flag_ = tuple;
  v.list_ = std::make_shared<List>(std::move(items));
  return v;
}

Value Value::MakeDict(Dict items, bool is_namespace) {
  Value v;
  v.kind_ = Kind::kDict;
  v.flag_ = is_namespace;
  v.dict_ = std::make_shared<Dict>(std::move(items));
  return v;
}

Value Value::MakeFunction(std::string name, Function f) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.string_ = std::make_shared<const std::string>(std::move(name));
  v.function_ = std::make_shared<Function>(std::move(f));
  return v;
}

Value Value::Undefined(std::string hint) {
  Value v;
  v.string_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::FromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return None();
    case nlohmann::ordered_json::value_t::boolean:
      return Bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Int(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float:
      return Float(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return String(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      for (const auto& e : j) items.push_back(FromJson(e));
      return MakeList(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict items;
      for (auto it = j.begin(); it != j.end(); ++it) {
        items.emplace_back(it.key(), FromJson(it.value()));
      }
      return MakeDict(std::move(items));
    }
    default:
      return None();
  }
}

absl::StatusOr<nlohmann::ordered_json> Value::ToJson() const {
  WalkLevel level;
  if (!level.ok()) return Budget::Current()->status();
  switch (kind_) {
    case Kind::kNone:
      return nlohmann::ordered_json(nullptr);
    case Kind::kBool:
      return nlohmann::ordered_json(as_bool());
    case Kind::kInt:
      return nlohmann::ordered_json(int_);
    case Kind::kFloat:
      return nlohmann::ordered_json(float_);
    case Kind::kString:
      return nlohmann::ordered_json(text());
    case Kind::kList: {
      nlohmann::ordered_json out = nlohmann::ordered_json::array();
      for (const Value& e : *list_) {
        absl::StatusOr<nlohmann::ordered_json> j = e.ToJson();
        if (!j.ok()) return j.status();
        out.push_back(*std::move(j));
      }
      return out;
    }
    case Kind::kDict: {
      nlohmann::ordered_json out = nlohmann::ordered_json::object();
      for (const auto& [k, e] : *dict_) {
        absl::StatusOr<nlohmann::ordered_json> j = e.ToJson();
        if (!j.ok()) return j.status();
        out[k] = *std::move(j);
      }
      return out;
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(TypeName(), " is not JSON serializable"));
  }
}

const Value* Value::Find(const std::string& key) const {
  if (!is_dict()) return nullptr;
  for (const auto& [k, v] : *dict_) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Value::Set(const std::string& key, Value v) const {
  for (auto& [k, e] : *dict_) {
    if (k == key) {
      e = std::move(v);
      return;
    }
  }
  dict_->emplace_back(key, std::move(v));
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
    case Kind::kInt:
      return int_ != 0;
    case Kind::kFloat:
      return float_ != 0;
    case Kind::kString:
      return !text().empty();
    case Kind::kList:
      return !list_->empty();
    case Kind::kDict:
      return !dict_->empty();
    case Kind::kFunction:
      return true;
  }
  return false;
}

namespace {

std::string PythonStringRepr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == quote || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

}  // namespace

std::string PythonFloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest digits that read back as `d`, as Python's repr picks them.
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*e", precision - 1, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string text(buf);
  const bool negative = text[0] == '-';
  if (negative) text.erase(0, 1);
  const size_t e = text.find('e');
  const int exponent = std::atoi(text.c_str() + e + 1);
  std::string digits = text.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) absl::StrAppend(&out, ".", digits.substr(1));
    char exp[8];
    std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+',
                  std::abs(exponent));
    return out + exp;
  }
  if (exponent < 0) {
    return absl::StrCat(out, "0.", std::string(-exponent - 1, '0'), digits);
  }
  const size_t int_len = static_cast<size_t>(exponent) + 1;
  if (digits.size() <= int_len) {
    return absl::StrCat(out, digits, std::string(int_len - digits.size(), '0'),
                        ".0");
  }
  return absl::StrCat(out, digits.substr(0, int_len), ".",
                      digits.substr(int_len));
}

std::string Value::Str() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return text();
    default:
      return Repr();
  }
}

std::string Value::Repr() const {
  // Stops early (the render then fails naming the limit) once this render's
  // budget is spent.
  WalkLevel level;
  if (!level.ok()) return "";
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return as_bool() ? "True" : "False";
    case Kind::kInt:
      return std::to_string(int_);
    case Kind::kFloat:
      return PythonFloatRepr(float_);
    case Kind::kString:
      return PythonStringRepr(text());
    case Kind::kList: {
      std::string out = is_tuple() ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i > 0) out += ", ";
        out += (*list_)[i].Repr();
        if (!level.Fits(out.size())) return out;
      }
      if (is_tuple() && list_->size() == 1) out += ",";
      return out + (is_tuple() ? ")" : "]");
    }
    case Kind::kDict: {
      if (is_namespace()) return "<Namespace>";
      std::string out = "{";
      for (size_t i = 0; i < dict_->size(); ++i) {
        if (i > 0) out += ", ";
        absl::StrAppend(&out, PythonStringRepr((*dict_)[i].first), ": ",
                        (*dict_)[i].second.Repr());
        if (!level.Fits(out.size())) return out;
      }
      return out + "}";
    }
    case Kind::kFunction:
      return absl::StrCat("<function ", text(), ">");
  }
  return "";
}

bool Value::Equals(const Value& o) const {
  WalkLevel level;
  if (!level.ok()) return false;  // the render fails naming the limit
  if (is_number() && o.is_number()) {
    if (is_float() || o.is_float()) return as_number() == o.as_number();
    return int_ == o.int_;
  }
  if ((is_bool() && o.is_number()) || (is_number() && o.is_bool())) {
    return as_number() == o.as_number();
  }
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kBool:
      return int_ == o.int_;
    case Kind::kString:
      return string_ == o.string_ || text() == o.text();
    case Kind::kList:
      if (list_->size() != o.list_->size()) return false;
      for (size_t i = 0; i < list_->size(); ++i) {
        if (!(*list_)[i].Equals((*o.list_)[i])) return false;
      }
      return true;
    case Kind::kDict:
      if (dict_ == o.dict_) return true;
      if (dict_->size() != o.dict_->size()) return false;
      for (const auto& [k, v] : *dict_) {
        const Value* other = o.Find(k);
        if (other == nullptr || !v.Equals(*other)) return false;
      }
      return true;
    case Kind::kFunction:
      return function_ == o.function_;
    default:
      return false;
  }
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "undefined";
    case Kind::kNone:
      return "none";
    case Kind::kBool:
      return "boolean";
    case Kind::kInt:
      return "integer";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "string";
    case Kind::kList:
      return is_tuple() ? "tuple" : "list";
    case Kind::kDict:
      return is_namespace() ? "namespace" : "dict";
    case Kind::kFunction:
      return "function";
  }
  return "?";
}

}  // namespace flotilla::jinja
