// Item, slice and attribute access, iteration, len(), argument reading.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "shared/jinja/budget.h"
#include "shared/jinja/builtins.h"

namespace flotilla::jinja::internal {

std::vector<uint32_t> DecodeUtf8(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const int len = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
    uint32_t cp = len == 1 ? c : (c & (0x7f >> len));
    for (int k = 1; k < len && i + k < s.size(); ++k) {
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

void AppendUtf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xc0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xe0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    *out += static_cast<char>(0xf0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

std::string EncodeUtf8(const std::vector<uint32_t>& cps, size_t begin,
                       size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) AppendUtf8(&out, cps[i]);
  return out;
}

absl::Status TooLarge() {
  return absl::ResourceExhaustedError(
      absl::StrCat("a string or list built by the template is too large (over ",
                   kMaxBuiltBytes, " bytes or ", kMaxBuiltItems, " items)"));
}

size_t JoinedSize(const std::vector<std::string>& parts,
                  size_t separator_size) {
  size_t total = parts.empty() ? 0 : (parts.size() - 1) * separator_size;
  for (const std::string& p : parts) total += p.size();
  return total;
}

absl::Status UndefinedError(const Value& v) {
  return absl::InvalidArgumentError(
      v.name().empty() ? std::string("value is undefined")
                       : absl::StrCat("'", v.name(), "' is undefined"));
}

ArgReader::ArgReader(CallArgs& args, std::string function,
                     std::vector<std::string> names)
    : args_(args), function_(std::move(function)), names_(std::move(names)) {}

Value ArgReader::Get(size_t index) const {
  if (index < args_.positional.size()) return args_.positional[index];
  if (index < names_.size()) {
    for (const auto& [k, v] : args_.keyword) {
      if (k == names_[index]) return v;
    }
  }
  return Value();
}

bool ArgReader::Has(size_t index) const {
  if (index < args_.positional.size()) return true;
  for (const auto& [k, v] : args_.keyword) {
    if (index < names_.size() && k == names_[index]) return true;
  }
  return false;
}

absl::Status ArgReader::Check() const {
  if (args_.positional.size() > names_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(function_, "() takes at most ", names_.size(),
                     " arguments (", args_.positional.size(), " given)"));
  }
  for (const auto& [k, v] : args_.keyword) {
    if (std::find(names_.begin(), names_.end(), k) == names_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          function_, "() got an unexpected keyword argument '", k, "'"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Value>> Iterate(const Value& v) {
  // Every item visited is a step of the render's budget, taken before the
  // items are made (a 60 MB string is 60 M one-character values).
  Budget* budget = Budget::Current();
  auto charge = [budget](size_t items) {
    return budget == nullptr || budget->Spend(static_cast<int64_t>(items));
  };
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return std::vector<Value>{};
    case Value::Kind::kList:
      if (!charge(v.list().size())) return budget->status();
      return v.list();
    case Value::Kind::kDict: {
      if (v.is_namespace()) break;
      if (!charge(v.dict().size())) return budget->status();
      std::vector<Value> keys;
      for (const auto& [k, e] : v.dict()) keys.push_back(Value::String(k));
      return keys;
    }
    case Value::Kind::kString: {
      if (!charge(v.as_string().size())) return budget->status();
      std::vector<uint32_t> cps = DecodeUtf8(v.as_string());
      std::vector<Value> chars;
      for (size_t i = 0; i < cps.size(); ++i) {
        chars.push_back(Value::String(EncodeUtf8(cps, i, i + 1)));
      }
      return chars;
    }
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", v.TypeName(), "' object is not iterable"));
}

absl::StatusOr<int64_t> Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(DecodeUtf8(v.as_string()).size());
    case Value::Kind::kList:
      return static_cast<int64_t>(v.list().size());
    case Value::Kind::kDict:
      if (v.is_namespace()) break;
      return static_cast<int64_t>(v.dict().size());
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("object of type '", v.TypeName(), "' has no len()"));
}

absl::StatusOr<Value> GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (obj.is_dict() && key.is_string()) {
    if (const Value* found = obj.Find(key.as_string())) return *found;
    return GetAttribute(obj, key.as_string());
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    const bool text = obj.is_string();
    std::vector<uint32_t> cps;
    if (text) cps = DecodeUtf8(obj.as_string());
    const int64_t n =
        text ? static_cast<int64_t>(cps.size())
             : static_cast<int64_t>(obj.list().size());
    int64_t i = key.as_int();
    if (i < 0) i += n;
    if (i < 0 || i >= n) {
      return Value::Undefined(absl::StrCat(obj.TypeName(), " index ",
                                           key.as_int(), " out of range"));
    }
    if (text) return Value::String(EncodeUtf8(cps, i, i + 1));
    return obj.list()[i];
  }
  if (key.is_string()) return GetAttribute(obj, key.as_string());
  return Value::Undefined(
      absl::StrCat(obj.TypeName(), " has no item ", key.Repr()));
}

absl::StatusOr<Value> GetSlice(const Value& obj, const Value& start_v,
                               const Value& stop_v, const Value& step_v) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (!obj.is_list() && !obj.is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", obj.TypeName(), "' object is not subscriptable"));
  }
  for (const Value* part : {&start_v, &stop_v, &step_v}) {
    if (!part->is_undefined() && !part->is_none() && !part->is_int()) {
      return absl::InvalidArgumentError(
          "slice indices must be integers or None");
    }
  }
  const bool text = obj.is_string();
  std::vector<uint32_t> cps;
  if (text) cps = DecodeUtf8(obj.as_string());
  const int64_t n = text ? static_cast<int64_t>(cps.size())
                         : static_cast<int64_t>(obj.list().size());
  const int64_t step = step_v.is_int() ? step_v.as_int() : 1;
  if (step == 0) return absl::InvalidArgumentError("slice step cannot be zero");
  // Python's slice.indices().
  auto clamp = [&](const Value& v, int64_t dflt) -> int64_t {
    if (!v.is_int()) return dflt;
    int64_t i = v.as_int();
    if (i < 0) {
      i += n;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = step < 0 ? n - 1 : n;
    }
    return i;
  };
  const int64_t start = clamp(start_v, step < 0 ? n - 1 : 0);
  const int64_t stop = clamp(stop_v, step < 0 ? -1 : n);
  std::vector<int64_t> picked;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    picked.push_back(i);
    if (__builtin_add_overflow(i, step, &i)) break;
  }
  if (text) {
    std::string out;
    for (int64_t i : picked) out += EncodeUtf8(cps, i, i + 1);
    return Value::String(std::move(out));
  }
  Value::List items;
  for (int64_t i : picked) items.push_back(obj.list()[i]);
  return Value::MakeList(std::move(items), obj.is_tuple());
}

}  // namespace flotilla::jinja::internal
