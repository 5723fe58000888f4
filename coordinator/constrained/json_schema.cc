#include "coordinator/constrained/json_schema.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "shared/base/status_macros.h"

namespace flotilla::coordinator::constrained {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxDepth = 32;
constexpr size_t kMaxProperties = 64;
constexpr size_t kMaxLiterals = 64;
constexpr int kMaxAdds = 4096;

bool IsAnnotation(const std::string& key) {
  static const char* const kAnnotations[] = {
      "title", "description", "default",    "examples", "$schema",
      "$id",   "$comment",    "deprecated", "readOnly", "writeOnly",
      "$defs", "definitions", "format"};
  for (const char* a : kAnnotations) {
    if (key == a) return true;
  }
  return false;
}

std::string Compact(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// What a JSON pointer reference ("#", "#/$defs/a~1b") names in `root`, or
// null.
const Json* ResolvePointer(const Json* root, const std::string& target) {
  if (root == nullptr || target.empty() || target[0] != '#') return nullptr;
  const Json* node = root;
  if (target.size() == 1) return node;
  if (target[1] != '/') return nullptr;
  for (absl::string_view piece : absl::StrSplit(target.substr(2), '/')) {
    std::string token(piece);
    for (size_t p = 0; (p = token.find('~', p)) != std::string::npos; ++p) {
      if (p + 1 < token.size() && token[p + 1] == '1') {
        token.replace(p, 2, "/");
      } else if (p + 1 < token.size() && token[p + 1] == '0') {
        token.replace(p, 2, "~");
      }
    }
    if (!node->is_object() || !node->contains(token)) return nullptr;
    node = &(*node)[token];
  }
  return node;
}

// Which first bytes a value of `node` can start with (for anyOf).
std::string FirstBytes(const CompiledSchema& s, int node) {
  const SchemaNode& n = s.node(node);
  std::string out;
  if (n.has_literals) {
    for (const std::string& l : n.literals) out += l[0];
    return out;
  }
  for (int alt : n.any_of) out += FirstBytes(s, alt);
  if (!n.any_of.empty()) return out;
  if (n.types & kObject) out += '{';
  if (n.types & kArray) out += '[';
  if (n.types & kString) out += '"';
  if (n.types & (kNumber | kInteger)) out += "-0123456789";
  if (n.types & kBoolean) out += "tf";
  if (n.types & kNull) out += 'n';
  return out;
}

// Unicode code points in UTF-8 text (what minLength/maxLength count).
int64_t CodePoints(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

// Whether the enum/const value `text` (compact JSON) is of one of n's types
// and within its length and item bounds (JSON Schema applies every keyword
// beside enum/const too).
bool LiteralFits(const SchemaNode& n, const std::string& text) {
  const Json v = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return false;
  uint32_t bit = 0;
  if (v.is_object()) bit = kObject;
  if (v.is_array()) bit = kArray;
  if (v.is_string()) bit = kString;
  if (v.is_boolean()) bit = kBoolean;
  if (v.is_null()) bit = kNull;
  if (v.is_number_integer()) bit = kInteger;
  if (v.is_number_float()) {
    const double d = v.get<double>();
    // A whole value is an integer (1.0 is), however large: no cast, which
    // is undefined past int64's range (json_schema_fuzz: 8.9e111).
    bit = std::isfinite(d) && std::floor(d) == d ? kInteger : kNumber;
  }
  if ((n.types & bit) == 0) return false;
  if (v.is_number() && !n.bounds.HoldsReal(v.get<double>())) return false;
  if (v.is_string()) {
    const int64_t len = CodePoints(v.get<std::string>());
    if (len < n.min_length || (n.max_length >= 0 && len > n.max_length)) {
      return false;
    }
  }
  if (v.is_array()) {
    const int64_t size = static_cast<int64_t>(v.size());
    if (size < n.min_items || (n.max_items >= 0 && size > n.max_items)) {
      return false;
    }
  }
  return true;
}

// Narrows `n` to the values it really allows: a type whose own bounds
// contradict each other (minLength above maxLength, minItems above
// maxItems) holds no value, nor does an enum/const value of another type
// or outside the bounds. InvalidArgument, saying why, when nothing is left:
// the matcher would start a value it cannot finish.
absl::Status Narrow(SchemaNode* n) {
  std::vector<std::string> why;
  if ((n->types & kString) && n->max_length >= 0 &&
      n->min_length > n->max_length) {
    n->types &= ~kString;
    why.push_back(absl::StrCat("minLength ", n->min_length,
                               " is above maxLength ", n->max_length));
  }
  if ((n->types & kArray) && n->max_items >= 0 && n->min_items > n->max_items) {
    n->types &= ~kArray;
    why.push_back(absl::StrCat("minItems ", n->min_items, " is above maxItems ",
                               n->max_items));
  }
  if (n->has_literals && n->literals.empty()) {
    return absl::InvalidArgumentError("enum and const share no value");
  }
  if (n->has_literals) {
    std::vector<std::string> kept;
    for (const std::string& l : n->literals) {
      if (LiteralFits(*n, l)) kept.push_back(l);
    }
    if (kept.empty()) {
      why.push_back(
          "no enum/const value has an allowed type and fits the "
          "length and item bounds");
      return absl::InvalidArgumentError(absl::StrJoin(why, "; "));
    }
    n->literals = std::move(kept);
    return absl::OkStatus();
  }
  if (n->any_of.empty() && n->types == 0) {
    if (why.empty()) why.push_back("'type' lists no type");
    return absl::InvalidArgumentError(absl::StrJoin(why, "; "));
  }
  return absl::OkStatus();
}

}  // namespace

CompiledSchema::CompiledSchema() {
  nodes_.resize(3);
  nodes_[kAny].types = kAnyType;  // additional = items = 0: any inside
  nodes_[kBooleanLiterals].has_literals = true;
  nodes_[kBooleanLiterals].literals = {"true", "false"};
  nodes_[kNullLiteral].has_literals = true;
  nodes_[kNullLiteral].literals = {"null"};
}

CompiledSchema CompiledSchema::AnyObject() {
  CompiledSchema s;
  SchemaNode object;
  object.types = kObject;
  s.nodes_.push_back(object);
  s.root_ = static_cast<int>(s.nodes_.size()) - 1;
  for (int i = 0; i < static_cast<int>(s.nodes_.size()); ++i) s.ComputeMinBytes(i);
  return s;
}

absl::StatusOr<CompiledSchema> CompiledSchema::Compile(const Json& schema,
                                                       bool closed_objects) {
  CompiledSchema s;
  s.closed_objects_ = closed_objects;
  s.root_schema_ = &schema;
  FLOTILLA_ASSIGN_OR_RETURN(s.root_, s.Add(schema, "#", 0));
  for (int i = 0; i < static_cast<int>(s.nodes_.size()); ++i) s.ComputeMinBytes(i);
  s.root_schema_ = nullptr;
  return s;
}

absl::StatusOr<CompiledSchema> CompiledSchema::ToolCall(
    const std::vector<std::pair<std::string, Json>>& tools, int max_calls) {
  if (tools.empty() || tools.size() > kMaxLiterals) {
    return absl::InvalidArgumentError("a forced tool call needs 1 to 64 tools");
  }
  CompiledSchema s;
  s.closed_objects_ = true;
  SchemaNode names;
  names.has_literals = true;
  std::vector<int> arguments;
  for (size_t i = 0; i < tools.size(); ++i) {
    names.literals.push_back(Compact(Json(tools[i].first)));
    s.root_schema_ = &tools[i].second;
    FLOTILLA_ASSIGN_OR_RETURN(
        int node, s.Add(tools[i].second,
                        absl::StrCat("tools[", i, "].function.parameters"), 0));
    arguments.push_back(node);
  }
  s.root_schema_ = nullptr;
  s.nodes_.push_back(names);
  const int names_node = static_cast<int>(s.nodes_.size()) - 1;
  SchemaNode call;
  call.types = kObject;
  call.tool_call = true;
  call.property_keys = {"\"name\"", "\"arguments\""};
  call.property_nodes = {names_node, arguments[0]};
  call.required = 3;
  call.additional = -1;
  call.tool_arguments = arguments;
  s.nodes_.push_back(call);
  s.root_ = static_cast<int>(s.nodes_.size()) - 1;
  if (max_calls > 1) {
    SchemaNode calls;
    calls.types = kArray;
    calls.items = s.root_;
    calls.min_items = 1;
    calls.max_items = max_calls;
    s.nodes_.push_back(calls);
    s.root_ = static_cast<int>(s.nodes_.size()) - 1;
  }
  for (int i = 0; i < static_cast<int>(s.nodes_.size()); ++i) s.ComputeMinBytes(i);
  return s;
}

absl::StatusOr<int> CompiledSchema::Add(const Json& schema,
                                        const std::string& path, int depth) {
  auto bad = [&](const std::string& where, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", why));
  };
  if (depth > kMaxDepth) return bad(path, "the schema nests too deep");
  // Every schema added counts, so $refs used many times over cannot make
  // the compiled schema (or the work) grow without bound.
  if (++adds_ > kMaxAdds) {
    return bad(path, absl::StrCat("the schema expands to more than ", kMaxAdds,
                                  " subschemas"));
  }
  if (schema.is_boolean()) {
    if (!schema.get<bool>()) return bad(path, "a false schema allows nothing");
    return kAny;
  }
  if (!schema.is_object()) return bad(path, "a schema must be an object");
  if (schema.contains("$ref")) return AddRef(schema, path, depth);
  if (schema.contains("allOf")) return AddAllOf(schema, path, depth);
  SchemaNode n;
  bool typed = false, nullable = false;
  for (auto it = schema.begin(); it != schema.end(); ++it) {
    const std::string& key = it.key();
    const Json& v = it.value();
    const std::string at = path + "/" + key;
    if (IsAnnotation(key)) continue;
    if (key == "type") {
      const Json list = v.is_array() ? v : Json::array({v});
      n.types = 0;
      for (const Json& t : list) {
        if (!t.is_string()) return bad(at, "types are strings");
        const std::string name = t.get<std::string>();
        const uint32_t bit = name == "object"    ? kObject
                             : name == "array"   ? kArray
                             : name == "string"  ? kString
                             : name == "number"  ? kNumber | kInteger
                             : name == "integer" ? kInteger
                             : name == "boolean" ? kBoolean
                             : name == "null"    ? kNull
                                                 : 0;
        if (bit == 0) return bad(at, "unknown type '" + name + "'");
        n.types |= bit;
      }
      typed = true;
    } else if (key == "nullable") {
      nullable = v.is_boolean() && v.get<bool>();
    } else if (key == "enum" || key == "const") {
      const Json list = key == "const" ? Json::array({v}) : v;
      if (!list.is_array() || list.empty() || list.size() > kMaxLiterals) {
        return bad(at, "must list 1 to 64 values");
      }
      std::vector<std::string> values;
      for (const Json& l : list) values.push_back(Compact(l));
      if (n.has_literals) {
        // Both enum and const: a value must be in each (JSON Schema applies
        // every keyword), so the intersection; empty is refused below.
        std::vector<std::string> both;
        for (const std::string& l : n.literals) {
          if (std::find(values.begin(), values.end(), l) != values.end()) {
            both.push_back(l);
          }
        }
        values = std::move(both);
      }
      n.has_literals = true;
      n.literals = std::move(values);
    } else if (key == "properties") {
      if (!v.is_object()) return bad(at, "must be an object");
      if (v.size() > kMaxProperties) return bad(at, "more than 64 properties");
      for (auto p = v.begin(); p != v.end(); ++p) {
        FLOTILLA_ASSIGN_OR_RETURN(int child,
                                  Add(p.value(), at + "/" + p.key(), depth + 1));
        n.property_keys.push_back(Compact(Json(p.key())));
        n.property_nodes.push_back(child);
      }
    } else if (key == "additionalProperties") {
      if (v.is_boolean()) {
        n.additional = v.get<bool>() ? kAny : -1;
      } else {
        FLOTILLA_ASSIGN_OR_RETURN(n.additional, Add(v, at, depth + 1));
      }
    } else if (key == "items") {
      if (v.is_array()) return bad(at, "tuple items are not supported");
      FLOTILLA_ASSIGN_OR_RETURN(n.items, Add(v, at, depth + 1));
    } else if (key == "minItems" || key == "maxItems" || key == "minLength" ||
               key == "maxLength") {
      if (!v.is_number_unsigned()) return bad(at, "must be a whole number");
      const int64_t x = static_cast<int64_t>(v.get<uint64_t>());
      (key == "minItems"    ? n.min_items
       : key == "maxItems"  ? n.max_items
       : key == "minLength" ? n.min_length
                            : n.max_length) = x;
    } else if (key == "anyOf" || key == "oneOf") {
      if (!v.is_array() || v.empty()) return bad(at, "must be a list of schemas");
      for (size_t i = 0; i < v.size(); ++i) {
        FLOTILLA_ASSIGN_OR_RETURN(
            int alt, Add(v[i], absl::StrCat(at, "/", i), depth + 1));
        n.any_of.push_back(alt);
      }
    } else if (key == "minimum" || key == "maximum" ||
               key == "exclusiveMinimum" || key == "exclusiveMaximum") {
      if (absl::Status st = AddBound(key, v, &n.bounds); !st.ok()) {
        return bad(at, std::string(st.message()));
      }
    } else if (key == "required") {
      continue;  // after properties, below
    } else {
      return bad(at, "the keyword '" + key +
                         "' is not supported by constrained decoding");
    }
  }
  // Tool arguments take the declared properties only (strict mode's rule):
  // a model otherwise invents keys the tool never reads.
  if (closed_objects_ && !n.property_keys.empty() &&
      !schema.contains("additionalProperties")) {
    n.additional = -1;
  }
  if (schema.contains("required")) {
    const Json& req = schema["required"];
    if (!req.is_array()) return bad(path + "/required", "must be a list");
    for (const Json& r : req) {
      if (!r.is_string()) return bad(path + "/required", "names are strings");
      const std::string encoded = Compact(r);
      auto it = std::find(n.property_keys.begin(), n.property_keys.end(), encoded);
      if (it == n.property_keys.end()) {
        if (n.additional < 0 || n.property_keys.size() >= kMaxProperties) {
          return bad(path + "/required",
                     "'" + r.get<std::string>() + "' is not a property");
        }
        n.property_keys.push_back(encoded);
        n.property_nodes.push_back(n.additional);
        it = n.property_keys.end() - 1;
      }
      n.required |= uint64_t{1} << (it - n.property_keys.begin());
    }
  }
  if (nullable && typed) n.types |= kNull;
  if (n.bounds.bounded && (n.types & (kNumber | kInteger))) {
    if (absl::Status st = FinishBounds(&n.bounds); !st.ok()) {
      return bad(path, std::string(st.message()));
    }
  }
  if (!n.any_of.empty() && (typed || n.has_literals)) {
    return bad(path, "anyOf/oneOf beside type or enum is not supported");
  }
  if (n.min_items > 1024 || n.min_length > 4096) {
    return bad(path, "minItems/minLength above 1024/4096");
  }
  // A schema no value satisfies is refused here, naming its path. Every
  // node kept allows some value, so a parent whose required property,
  // items or alternatives were refused never gets this far.
  if (absl::Status st = Narrow(&n); !st.ok()) {
    return bad(path, absl::StrCat("no value satisfies this schema (",
                                  st.message(), ")"));
  }
  nodes_.push_back(std::move(n));
  const int index = static_cast<int>(nodes_.size()) - 1;
  // The matcher picks an alternative by the value's first byte.
  const SchemaNode& added = nodes_[index];
  std::string seen;
  for (int alt : added.any_of) {
    for (char c : FirstBytes(*this, alt)) {
      if (seen.find(c) != std::string::npos) {
        return bad(path, "anyOf/oneOf alternatives that can start alike "
                         "are not supported");
      }
    }
    seen += FirstBytes(*this, alt);
  }
  return index;
}

absl::StatusOr<int> CompiledSchema::AddRef(const Json& schema,
                                           const std::string& path, int depth) {
  const std::string at = path + "/$ref";
  const Json& ref = *schema.find("$ref");
  for (auto it = schema.begin(); it != schema.end(); ++it) {
    if (it.key() != "$ref" && !IsAnnotation(it.key())) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, "/", it.key(), ": keywords beside $ref are not supported"));
    }
  }
  if (!ref.is_string() || ref.get<std::string>().rfind("#", 0) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(at,
                     ": only references into this schema (\"#/$defs/...\") are "
                     "supported"));
  }
  const std::string target = ref.get<std::string>();
  if (std::find(refs_open_.begin(), refs_open_.end(), target) !=
      refs_open_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, ": ", target,
                     " refers back to itself (recursive schemas are "
                     "not supported by constrained decoding)"));
  }
  const Json* found = ResolvePointer(root_schema_, target);
  if (found == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, ": ", target, " names nothing in this schema"));
  }
  refs_open_.push_back(target);
  absl::StatusOr<int> added = Add(*found, target, depth + 1);
  refs_open_.pop_back();
  return added;
}

absl::StatusOr<int> CompiledSchema::AddAllOf(const Json& schema,
                                             const std::string& path,
                                             int depth) {
  const std::string at = path + "/allOf";
  const Json& parts = *schema.find("allOf");
  if (!parts.is_array() || parts.empty()) {
    return absl::InvalidArgumentError(at + ": must be a list of schemas");
  }
  Json merged = schema;
  merged.erase("allOf");
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string here = absl::StrCat(at, "/", i);
    const Json* part = &parts[i];
    // A part that is a reference merges what it names.
    std::vector<std::string> seen;
    while (part->is_object() && part->contains("$ref") &&
           (*part)["$ref"].is_string() && root_schema_ != nullptr) {
      const std::string target = (*part)["$ref"].get<std::string>();
      if (std::find(seen.begin(), seen.end(), target) != seen.end() ||
          target.rfind("#/", 0) != 0) {
        return absl::InvalidArgumentError(here + ": unresolvable $ref");
      }
      seen.push_back(target);
      const Json* node = ResolvePointer(root_schema_, target);
      if (node == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(here, ": ", target, " names nothing in this schema"));
      }
      part = node;
    }
    if (!part->is_object()) {
      return absl::InvalidArgumentError(here + ": must be an object schema");
    }
    for (auto it = part->begin(); it != part->end(); ++it) {
      const std::string& key = it.key();
      if (IsAnnotation(key)) continue;
      if (key == "type") {
        if (it.value() != "object") {
          return absl::InvalidArgumentError(
              here + "/type: allOf parts must be objects");
        }
        merged["type"] = "object";
      } else if (key == "properties") {
        if (!it.value().is_object()) {
          return absl::InvalidArgumentError(here +
                                            "/properties: not an object");
        }
        for (auto p = it.value().begin(); p != it.value().end(); ++p) {
          if (merged.contains("properties") &&
              merged["properties"].contains(p.key()) &&
              merged["properties"][p.key()] != p.value()) {
            return absl::InvalidArgumentError(
                absl::StrCat(here, "/properties/", p.key(),
                             ": declared differently by two allOf parts"));
          }
          merged["properties"][p.key()] = p.value();
        }
      } else if (key == "required") {
        if (!it.value().is_array()) {
          return absl::InvalidArgumentError(here + "/required: not a list");
        }
        for (const Json& r : it.value()) {
          if (!merged.contains("required")) merged["required"] = Json::array();
          if (std::find(merged["required"].begin(), merged["required"].end(),
                        r) == merged["required"].end()) {
            merged["required"].push_back(r);
          }
        }
      } else if (key == "additionalProperties") {
        // The stricter wins: false over a schema over true.
        if (!merged.contains("additionalProperties") || it.value() == false ||
            merged["additionalProperties"] == true) {
          merged["additionalProperties"] = it.value();
        }
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            here, "/", key,
            ": allOf parts may hold type, properties, required and "
            "additionalProperties only"));
      }
    }
  }
  return Add(merged, path, depth + 1);
}

void CompiledSchema::ComputeMinBytes(int index) {
  // Children are added before their parent, so they are already computed
  // (and fixed nodes come first).
  SchemaNode& n = nodes_[index];
  int64_t best = INT64_MAX;
  if (n.has_literals) {
    for (const std::string& l : n.literals) {
      best = std::min<int64_t>(best, static_cast<int64_t>(l.size()));
    }
  } else if (!n.any_of.empty()) {
    for (int alt : n.any_of) best = std::min(best, nodes_[alt].min_bytes);
  } else {
    if (n.types & kObject) {
      int64_t bytes = 2, count = 0;
      for (size_t i = 0; i < n.property_keys.size(); ++i) {
        if (!(n.required & (uint64_t{1} << i))) continue;
        int64_t child = nodes_[n.property_nodes[i]].min_bytes;
        if (n.tool_call && i == 1) {
          for (int a : n.tool_arguments) child = std::min(child, nodes_[a].min_bytes);
        }
        bytes += static_cast<int64_t>(n.property_keys[i].size()) + 1 + child;
        ++count;
      }
      best = std::min(best, bytes + std::max<int64_t>(0, count - 1));
    }
    if (n.types & kArray) {
      const int64_t m = n.min_items;
      best = std::min(best, 2 + m * nodes_[n.items].min_bytes +
                                std::max<int64_t>(0, m - 1));
    }
    if (n.types & kString) best = std::min(best, 2 + n.min_length);
    if (n.types & (kNumber | kInteger)) {
      best = std::min<int64_t>(best,
                               n.bounds.bounded ? n.bounds.ShortestBytes() : 1);
    }
    if (n.types & (kBoolean | kNull)) best = std::min<int64_t>(best, 4);
  }
  n.min_bytes = best == INT64_MAX ? 1 : best;
  n.first_bytes = FirstBytes(*this, index);
}

}  // namespace flotilla::coordinator::constrained
