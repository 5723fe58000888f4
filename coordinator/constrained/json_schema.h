// JSON schemas compiled for constrained decoding (json_matcher.h): the
// subset tool definitions and structured-output requests use. Enforced:
// type (one or a list), properties, required, additionalProperties
// (false, true, or a schema), items, minItems/maxItems,
// minLength/maxLength, enum, const, anyOf/oneOf whose alternatives differ
// in their first character (e.g. a string or null), OpenAPI's nullable,
// and minimum / maximum / exclusiveMinimum / exclusiveMaximum of numbers
// and integers (number_bounds.h; zod's safe-integer bounds included).
// $ref into the root's $defs / definitions (not recursive), allOf of
// object schemas (merged). Annotations (title, description, default,
// examples, $schema, $id, $comment, deprecated, readOnly, writeOnly,
// $defs, definitions) are ignored, and so is a string's `format`
// (date-time, email, uuid, uri, ...): documented as not enforced, the
// value is any string. Any other keyword (pattern, multipleOf, ...) is
// refused with its path, never silently dropped.
#ifndef FLOTILLA_COORDINATOR_CONSTRAINED_JSON_SCHEMA_H_
#define FLOTILLA_COORDINATOR_CONSTRAINED_JSON_SCHEMA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/constrained/number_bounds.h"
#include "nlohmann/json.hpp"

namespace flotilla::coordinator::constrained {

enum TypeBit : uint32_t {
  kObject = 1,
  kArray = 2,
  kString = 4,
  kNumber = 8,
  kInteger = 16,
  kBoolean = 32,
  kNull = 64,
  kAnyType = 127,
};

struct SchemaNode {
  uint32_t types = kAnyType;
  // enum/const: the only values allowed, as compact JSON text.
  std::vector<std::string> literals;
  bool has_literals = false;
  // anyOf/oneOf alternatives (node indices); empty when none.
  std::vector<int> any_of;
  // object
  std::vector<std::string> property_keys;  // JSON-encoded, with quotes
  std::vector<int> property_nodes;
  uint64_t required = 0;  // bit per property
  // Keys not in properties: -1 refused, else the node their values follow.
  int additional = 0;
  // A forced tool call: {"name": <one of literals of node property 0>,
  // "arguments": <tool_arguments[the name's index]>} in that order.
  bool tool_call = false;
  std::vector<int> tool_arguments;
  // array
  int items = 0;  // node of every item
  int64_t min_items = 0, max_items = -1;
  // string
  int64_t min_length = 0, max_length = -1;
  // number / integer: minimum, maximum and their exclusive forms
  NumberBounds bounds;
  // Fewest bytes a value of this node takes (for closing in time), and the
  // bytes a value of it can start with.
  int64_t min_bytes = 1;
  std::string first_bytes;
};

class CompiledSchema {
 public:
  // InvalidArgument naming the JSON path ("#/properties/days/minimum") of
  // what is not supported or not valid.
  // With `closed_objects` (tool arguments, as OpenAI's strict mode reads
  // them), an object schema that lists properties and says nothing of
  // additionalProperties takes only those properties; otherwise other keys
  // are allowed, as JSON Schema says.
  static absl::StatusOr<CompiledSchema> Compile(
      const nlohmann::ordered_json& schema, bool closed_objects = false);
  // Any JSON object (response_format json_object).
  static CompiledSchema AnyObject();
  // One call of one of `tools` (name, parameters schema):
  // {"name": "...", "arguments": {...}} (tool_choice "required"); the
  // arguments' objects are closed (see Compile).
  // With `max_calls` > 1: a JSON array of 1..max_calls such calls
  // (tool_choice "required" with parallel_tool_calls).
  static absl::StatusOr<CompiledSchema> ToolCall(
      const std::vector<std::pair<std::string, nlohmann::ordered_json>>& tools,
      int max_calls = 1);

  const SchemaNode& node(int i) const { return nodes_[i]; }
  int root() const { return root_; }
  // Fixed nodes: any JSON value, and the literals true/false and null.
  static constexpr int kAny = 0;
  static constexpr int kBooleanLiterals = 1;
  static constexpr int kNullLiteral = 2;

 private:
  CompiledSchema();
  absl::StatusOr<int> Add(const nlohmann::ordered_json& schema,
                          const std::string& path, int depth);
  // {"$ref": "#/$defs/x"} (or "#/definitions/x", any JSON pointer into the
  // root) compiled as what it names; a $ref that reaches itself is refused.
  absl::StatusOr<int> AddRef(const nlohmann::ordered_json& schema,
                             const std::string& path, int depth);
  // allOf of object schemas merged into one (properties, required,
  // additionalProperties); anything else in a part is refused.
  absl::StatusOr<int> AddAllOf(const nlohmann::ordered_json& schema,
                               const std::string& path, int depth);
  void ComputeMinBytes(int node);

  std::vector<SchemaNode> nodes_;
  int root_ = 0;
  bool closed_objects_ = false;
  const nlohmann::ordered_json* root_schema_ = nullptr;  // while compiling
  std::vector<std::string> refs_open_;                   // $refs being added
  int adds_ = 0;  // subschemas added so far (bounded)
};

}  // namespace flotilla::coordinator::constrained

#endif  // FLOTILLA_COORDINATOR_CONSTRAINED_JSON_SCHEMA_H_
