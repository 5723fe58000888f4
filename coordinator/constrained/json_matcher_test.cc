#include "coordinator/constrained/json_matcher.h"

#include <random>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace flotilla::coordinator::constrained {
namespace {

using Json = nlohmann::ordered_json;

CompiledSchema Compile(const std::string& schema) {
  absl::StatusOr<CompiledSchema> s = CompiledSchema::Compile(Json::parse(schema));
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

// Whether `text` is accepted whole and leaves a complete value.
bool Accepts(const CompiledSchema& s, const std::string& text) {
  JsonMatcher m(&s);
  return m.FeedAll(text) && m.CanEnd();
}

// A validator for the subset, independent of the matcher.
bool Valid(const Json& v, const Json& s) {
  if (s.contains("enum")) {
    for (const Json& e : s["enum"]) {
      if (e == v) return true;
    }
    return false;
  }
  if (s.contains("anyOf")) {
    for (const Json& alt : s["anyOf"]) {
      if (Valid(v, alt)) return true;
    }
    return false;
  }
  if (s.contains("type")) {
    const Json types = s["type"].is_array() ? s["type"] : Json::array({s["type"]});
    bool ok = false;
    for (const Json& t : types) {
      ok |= (t == "object" && v.is_object()) || (t == "array" && v.is_array()) ||
            (t == "string" && v.is_string()) ||
            (t == "number" && v.is_number()) ||
            (t == "integer" && v.is_number_integer()) ||
            (t == "boolean" && v.is_boolean()) || (t == "null" && v.is_null());
    }
    if (!ok) return false;
  }
  if (v.is_number()) {
    const double x = v.get<double>();
    if (s.contains("minimum") && x < s["minimum"].get<double>()) return false;
    if (s.contains("maximum") && x > s["maximum"].get<double>()) return false;
    if (s.contains("exclusiveMinimum") &&
        x <= s["exclusiveMinimum"].get<double>()) {
      return false;
    }
    if (s.contains("exclusiveMaximum") &&
        x >= s["exclusiveMaximum"].get<double>()) {
      return false;
    }
  }
  if (v.is_object()) {
    for (const Json& r : s.value("required", Json::array())) {
      if (!v.contains(r.get<std::string>())) return false;
    }
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (s.contains("properties") && s["properties"].contains(it.key())) {
        if (!Valid(it.value(), s["properties"][it.key()])) return false;
      } else if (s.contains("additionalProperties")) {
        const Json& extra = s["additionalProperties"];
        if (extra == false) return false;
        if (extra.is_object() && !Valid(it.value(), extra)) return false;
      }
    }
  }
  if (v.is_array()) {
    if (v.size() < s.value("minItems", 0u)) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
    for (const Json& item : v) {
      if (s.contains("items") && !Valid(item, s["items"])) return false;
    }
  }
  if (v.is_string() && s.contains("maxLength")) {
    size_t code_points = 0;  // maxLength counts characters, not bytes
    for (unsigned char c : v.get<std::string>()) code_points += (c & 0xc0) != 0x80;
    if (code_points > s["maxLength"].get<size_t>()) return false;
  }
  return true;
}

constexpr char kPerson[] = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer"},
    "mood": {"enum": ["happy", "sad", 3, null]},
    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1,
             "maxItems": 3},
    "pet": {"anyOf": [{"type": "null"},
                       {"type": "object", "properties": {"kind": {"type": "string"}},
                        "required": ["kind"], "additionalProperties": false}]},
    "score": {"type": ["number", "null"]}
  },
  "required": ["name", "age", "tags"],
  "additionalProperties": false
})";

TEST(JsonMatcherTest, AcceptsWhatTheSchemaAllowsAndNothingElse) {
  const CompiledSchema s = Compile(kPerson);
  EXPECT_TRUE(Accepts(s, R"({"name":"Al","age":3,"tags":["x"]})"));
  EXPECT_TRUE(Accepts(s, R"({"tags": ["a", "b"], "age": -12, "name": "Bé"})"));
  EXPECT_TRUE(Accepts(s, R"({"name":"","age":0,"tags":["\u00e9\n"],"mood":3,"pet":null,"score":1.5e-3})"));
  EXPECT_TRUE(Accepts(s, R"({"name":"x","age":1,"tags":["t"],"pet":{"kind":"cat"},"mood":null})"));
  EXPECT_FALSE(Accepts(s, R"({"name":"Al","age":3})"));                  // tags
  EXPECT_FALSE(Accepts(s, R"({"name":"Al","age":3.5,"tags":["x"]})"));   // integer
  EXPECT_FALSE(Accepts(s, R"({"name":"Al","age":3,"tags":[]})"));        // minItems
  EXPECT_FALSE(Accepts(s, R"({"name":"Al","age":3,"tags":["a","b","c","d"]})"));
  EXPECT_FALSE(Accepts(s, R"({"name":"Al","age":3,"tags":["x"],"extra":1})"));
  EXPECT_FALSE(Accepts(s, R"({"name":"Al","name":"B","age":3,"tags":["x"]})"));
  EXPECT_FALSE(Accepts(s, R"({"name":"Al","age":3,"tags":["x"],"mood":"ok"})"));
  EXPECT_FALSE(Accepts(s, R"({"name":"thirteen chars","age":3,"tags":["x"]})"));
  EXPECT_FALSE(Accepts(s, R"({"name":"Al","age":03,"tags":["x"]})"));
  EXPECT_FALSE(Accepts(s, R"({"name":"Al",  "age":3,"tags":["x"]})"));   // 2 spaces
  EXPECT_FALSE(Accepts(s, "{\"name\":\"a\tb\",\"age\":3,\"tags\":[\"x\"]}"));
  EXPECT_FALSE(Accepts(s, R"({"name":"Al","age":3,"tags":["x"]} )"));
  EXPECT_FALSE(Accepts(s, "{\"name\":\"\xff\",\"age\":3,\"tags\":[\"x\"]}"));
}

TEST(JsonMatcherTest, OpenObjectsTakeAnyKeyButKeepDeclaredTypes) {
  const CompiledSchema s = Compile(
      R"({"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]})");
  EXPECT_TRUE(Accepts(s, R"({"x":[1,{"y":null}],"n":2})"));
  EXPECT_FALSE(Accepts(s, R"({"n":"two"})"));
  EXPECT_FALSE(Accepts(s, R"({"x":1})"));
  const CompiledSchema any = CompiledSchema::AnyObject();
  EXPECT_TRUE(Accepts(any, R"({"a":{"b":[true,false,null,"s",-0.5]}})"));
  EXPECT_FALSE(Accepts(any, R"([1])"));
}

// Issue 46 item 12: tool arguments take the declared properties only
// (strict mode's rule) when the schema says nothing of
// additionalProperties; a response_format schema stays open, as JSON
// Schema says; an explicit additionalProperties is kept either way.
TEST(JsonMatcherTest, ToolArgumentsTakeTheirDeclaredPropertiesOnly) {
  const Json params = Json::parse(
      R"({"type":"object","properties":{"n":{"type":"integer"},
          "o":{"type":"object","properties":{"k":{"type":"string"}}}},
          "required":["n"]})");
  absl::StatusOr<CompiledSchema> closed =
      CompiledSchema::Compile(params, /*closed_objects=*/true);
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_TRUE(Accepts(*closed, R"({"n":2,"o":{"k":"v"}})"));
  EXPECT_FALSE(Accepts(*closed, R"({"n":2,"x":1})"));
  EXPECT_FALSE(Accepts(*closed, R"({"n":2,"o":{"j":1}})"));
  absl::StatusOr<CompiledSchema> call =
      CompiledSchema::ToolCall({{"f", params}});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_TRUE(Accepts(*call, R"({"name":"f","arguments":{"n":1}})"));
  EXPECT_FALSE(Accepts(*call, R"({"name":"f","arguments":{"n":1,"x":2}})"));
  // Open where the caller is not a tool, or the schema says so.
  EXPECT_TRUE(Accepts(Compile(params.dump()), R"({"n":2,"x":1})"));
  Json open = params;
  open["additionalProperties"] = true;
  absl::StatusOr<CompiledSchema> explicit_open =
      CompiledSchema::Compile(open, /*closed_objects=*/true);
  ASSERT_TRUE(explicit_open.ok());
  EXPECT_TRUE(Accepts(*explicit_open, R"({"n":2,"x":1})"));
  // An object with no properties listed is any object, closed or not.
  absl::StatusOr<CompiledSchema> any = CompiledSchema::Compile(
      Json::parse(R"({"type":"object"})"), /*closed_objects=*/true);
  ASSERT_TRUE(any.ok());
  EXPECT_TRUE(Accepts(*any, R"({"x":1})"));
}

// tool_choice "required" with parallel_tool_calls: an array of 1..N calls.
TEST(JsonMatcherTest, ParallelForcedCallsAreAnArrayOfCalls) {
  const std::vector<std::pair<std::string, Json>> tools = {
      {"add",
       Json::parse(
           R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]})")}};
  absl::StatusOr<CompiledSchema> s = CompiledSchema::ToolCall(tools, 3);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(Accepts(*s, R"([{"name":"add","arguments":{"a":2}}])"));
  EXPECT_TRUE(Accepts(
      *s,
      R"([{"name":"add","arguments":{"a":2}},{"name":"add","arguments":{"a":3}}])"));
  EXPECT_FALSE(Accepts(*s, "[]"));
  EXPECT_FALSE(Accepts(*s, R"({"name":"add","arguments":{"a":2}})"));
  const std::string one = R"({"name":"add","arguments":{"a":1}})";
  EXPECT_FALSE(
      Accepts(*s, "[" + one + "," + one + "," + one + "," + one + "]"));
}

TEST(JsonMatcherTest, ToolCallPicksTheArgumentsOfTheNamedTool) {
  std::vector<std::pair<std::string, Json>> tools = {
      {"get_weather", Json::parse(R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false})")},
      {"add", Json::parse(R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false})")}};
  absl::StatusOr<CompiledSchema> s = CompiledSchema::ToolCall(tools);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(Accepts(*s, R"({"name":"add","arguments":{"a":2}})"));
  EXPECT_TRUE(Accepts(*s, R"({"name": "get_weather", "arguments": {"city": "Oslo"}})"));
  EXPECT_FALSE(Accepts(*s, R"({"name":"add","arguments":{"city":"Oslo"}})"));
  EXPECT_FALSE(Accepts(*s, R"({"arguments":{"a":2},"name":"add"})"));
  EXPECT_FALSE(Accepts(*s, R"({"name":"sub","arguments":{"a":2}})"));
}

TEST(JsonMatcherTest, RefusesWhatItCannotEnforceNamingThePath) {
  absl::StatusOr<CompiledSchema> s = CompiledSchema::Compile(Json::parse(
      R"({"type":"object","properties":{"days":{"type":"string","pattern":"^a"}}})"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "#/properties/days/pattern: the keyword 'pattern' is not supported "
            "by constrained decoding");
  s = CompiledSchema::Compile(Json::parse(
      R"({"anyOf":[{"type":"string"},{"enum":["a"]}]})"));
  EXPECT_FALSE(s.ok());
  s = CompiledSchema::Compile(Json::parse(R"({"$ref":"#/defs/x"})"));
  EXPECT_FALSE(s.ok());
}

TEST(JsonMatcherTest, SchemasNoValueSatisfiesAreRefusedNamingThePath) {
  // Issue 44 item 3: each was accepted and answered with invalid JSON.
  const std::pair<const char*, const char*> unsatisfiable[] = {
      {R"({"type":[]})",
       "#: no value satisfies this schema ('type' lists no "
       "type)"},
      {R"({"type":"string","minLength":5,"maxLength":2})",
       "#: no value satisfies this schema (minLength 5 is above maxLength 2)"},
      {R"({"type":"array","minItems":1,"maxItems":0})",
       "#: no value satisfies this schema (minItems 1 is above maxItems 0)"},
      {R"({"type":"string","const":5})",
       "#: no value satisfies this schema (no enum/const value has an "
       "allowed type and fits the length and item bounds)"},
      {R"({"type":"integer","enum":["a"]})",
       "#: no value satisfies this schema (no enum/const value has an "
       "allowed type and fits the length and item bounds)"},
      // Found by json_schema_fuzz: enum and const were taken as a union.
      {R"({"enum":[1,10,"m"],"const":"x"})",
       "#: no value satisfies this schema (enum and const share no value)"},
      {R"({"const":"ab","minLength":3})",
       "#: no value satisfies this schema (no enum/const value has an "
       "allowed type and fits the length and item bounds)"},
      {R"({"type":"object","properties":{"a":{"type":[]}}})",
       "#/properties/a: no value satisfies this schema ('type' lists no "
       "type)"},
      {R"({"type":"array","items":{"type":"string","maxLength":0,"minLength":1}})",
       "#/items: no value satisfies this schema (minLength 1 is above "
       "maxLength 0)"},
  };
  for (const auto& [schema, message] : unsatisfiable) {
    SCOPED_TRACE(schema);
    absl::StatusOr<CompiledSchema> s =
        CompiledSchema::Compile(Json::parse(schema));
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().message(), message);
  }
  // A forced tool call (tool_choice "required") with such parameters.
  absl::StatusOr<CompiledSchema> call = CompiledSchema::ToolCall(
      {{"ok", Json::parse(R"({"type":"object"})")},
       {"bad", Json::parse(R"({"type":"integer","enum":["a"]})")}});
  ASSERT_FALSE(call.ok());
  EXPECT_EQ(call.status().message(),
            "tools[1].function.parameters: no value satisfies this schema (no "
            "enum/const value has an allowed type and fits the length and "
            "item bounds)");
}

// Found by json_schema_fuzz's walk (issue 44): an overlong E0 80 80 was
// taken inside a string, and JSON parsers refuse the value.
TEST(JsonMatcherTest, StringsTakeOnlyValidUtf8) {
  const CompiledSchema s = Compile(R"({"type": "string"})");
  for (const char* bad :
       {"\"\xe0\x80\x80\"", "\"\xed\xa0\x80\"", "\"\xf0\x80\x80\x80\"",
        "\"\xf4\x90\x80\x80\"", "\"\xc0\xaf\"", "\"\xf5\x80\x80\x80\""}) {
    EXPECT_FALSE(Accepts(s, bad)) << bad;
  }
  for (const char* good :
       {"\"\xe0\xa0\x80\"", "\"\xed\x9f\xbf\"", "\"\xf0\x90\x80\x80\"",
        "\"\xf4\x8f\xbf\xbf\"", "\"\xc3\xa9\""}) {
    EXPECT_TRUE(Accepts(s, good)) << good;
  }
}

TEST(JsonMatcherTest, KeywordsOfOneTypeLeaveTheOtherTypesAllowed) {
  // JSON Schema applies minItems/maxItems to arrays only: without a type,
  // {"minItems": 1, "maxItems": 0} allows every value but an array.
  const CompiledSchema s = Compile(R"({"minItems":1,"maxItems":0})");
  EXPECT_FALSE(Accepts(s, "[]"));
  EXPECT_FALSE(Accepts(s, "[1]"));
  EXPECT_TRUE(Accepts(s, "1"));
  EXPECT_TRUE(Accepts(s, R"("a")"));
  // A string-or-null whose string bounds contradict: null only.
  const CompiledSchema n =
      Compile(R"({"type":["string","null"],"minLength":3,"maxLength":1})");
  EXPECT_FALSE(Accepts(n, R"("abc")"));
  EXPECT_FALSE(Accepts(n, R"("a")"));
  EXPECT_TRUE(Accepts(n, "null"));
  // enum values of another type are never produced.
  const CompiledSchema e = Compile(R"({"type":"integer","enum":[1,"a",2.0]})");
  EXPECT_TRUE(Accepts(e, "1"));
  EXPECT_TRUE(Accepts(e, "2.0"));
  EXPECT_FALSE(Accepts(e, R"("a")"));
}

// Random walks: pick any byte the matcher takes while the value can still
// close in the bytes left; every walk must end complete, parse, and validate.
void RandomWalks(const std::string& schema_text, int64_t shortest, int walks) {
  const Json schema = Json::parse(schema_text);
  const CompiledSchema s = Compile(schema_text);
  EXPECT_EQ(s.node(s.root()).min_bytes, shortest);
  const std::string alphabet =
      "{}[]\":, -.0123456789eEtrufalsnbcdghijkmopqvwxyzABC\\/\xc3\xa9";
  std::mt19937 rng(7);
  for (int walk = 0; walk < walks; ++walk) {
    const int64_t budget = shortest + walk % 110;
    JsonMatcher m(&s);
    std::string text;
    while (!m.Done() && !(m.CanEnd() && rng() % 4 == 0)) {
      std::vector<char> options;
      for (char c : alphabet) {
        JsonMatcher next = m;
        if (next.Feed(c) &&
            next.MinBytesToEnd() <=
                budget - static_cast<int64_t>(text.size()) - 1) {
          options.push_back(c);
        }
      }
      ASSERT_FALSE(options.empty()) << "stuck after: " << text;
      const char c = options[rng() % options.size()];
      ASSERT_TRUE(m.Feed(c));
      text += c;
    }
    ASSERT_LE(static_cast<int64_t>(text.size()), budget) << text;
    const Json parsed = Json::parse(text, nullptr, false);
    ASSERT_FALSE(parsed.is_discarded()) << text;
    EXPECT_TRUE(Valid(parsed, schema)) << text;
  }
}

// Issue 46 item 5: bounds as zod and clients write them. Integers reach
// only values in range digit by digit; a bounded number writes no exponent
// and a fraction only where its whole unit interval is in range.
TEST(JsonMatcherTest, NumberBoundsAreEnforcedDigitByDigit) {
  const CompiledSchema small =
      Compile(R"({"type":"integer","minimum":1,"maximum":100})");
  for (const char* ok : {"1", "7", "99", "100"}) {
    EXPECT_TRUE(Accepts(small, ok)) << ok;
  }
  for (const char* no : {"0", "101", "-1", "05", "1000", "1.0", "1e2"}) {
    EXPECT_FALSE(Accepts(small, no)) << no;
  }
  const CompiledSchema open = Compile(
      R"({"type":"integer","exclusiveMinimum":-3,"exclusiveMaximum":10})");
  for (const char* ok : {"-2", "0", "9"}) EXPECT_TRUE(Accepts(open, ok)) << ok;
  for (const char* no : {"-3", "10", "-0"}) {
    EXPECT_FALSE(Accepts(open, no)) << no;
  }
  // zod's z.number().int(): the safe-integer bounds.
  const CompiledSchema zod = Compile(
      R"({"type":"integer","minimum":-9007199254740991,
          "maximum":9007199254740991})");
  for (const char* ok : {"0", "123", "9007199254740991", "-9007199254740991"}) {
    EXPECT_TRUE(Accepts(zod, ok)) << ok;
  }
  for (const char* no :
       {"9007199254740992", "-9007199254740992", "12345678901234567"}) {
    EXPECT_FALSE(Accepts(zod, no)) << no;
  }
  const CompiledSchema unit =
      Compile(R"({"type":"number","minimum":-2.5,"maximum":2.5})");
  for (const char* ok : {"2", "-2", "1.9", "-1.25", "0.5"}) {
    EXPECT_TRUE(Accepts(unit, ok)) << ok;
  }
  for (const char* no : {"3", "-3", "2.4", "1e0", "2.5"}) {
    EXPECT_FALSE(Accepts(unit, no)) << no;  // 2.4, 2.5: conservative
  }
  // Ranges no integer fits, or none at all, are refused naming the path.
  for (const char* bad : {R"({"type":"integer","minimum":5,"maximum":3})",
                          R"({"type":"number","minimum":0.1,"maximum":0.9})",
                          R"({"type":"integer","minimum":"5"})"}) {
    absl::StatusOr<CompiledSchema> s =
        CompiledSchema::Compile(Json::parse(bad));
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("#"), std::string::npos) << s.status();
  }
  // Enum values out of range are dropped; none left is refused.
  const CompiledSchema e =
      Compile(R"({"enum":[1, 50, 500, "x"],"maximum":100})");
  EXPECT_TRUE(Accepts(e, "50"));
  EXPECT_FALSE(Accepts(e, "500"));
  EXPECT_TRUE(Accepts(e, "\"x\""));
}

// Issue 46 item 5: schemas as zod-to-json-schema, Pydantic and the SDKs
// write them: $ref into $defs / definitions, allOf of objects, format.
TEST(JsonMatcherTest, RefsAllOfAndFormatsAsClientsWriteThem) {
  const CompiledSchema pydantic = Compile(R"({
    "$defs": {"Pet": {"type": "object",
                      "properties": {"kind": {"enum": ["cat", "dog"]}},
                      "required": ["kind"], "additionalProperties": false}},
    "type": "object",
    "properties": {"pet": {"$ref": "#/$defs/Pet"},
                   "pets": {"type": "array", "items": {"$ref": "#/$defs/Pet"}},
                   "when": {"type": "string", "format": "date-time"}},
    "required": ["pet", "when"], "additionalProperties": false})");
  EXPECT_TRUE(Accepts(pydantic,
                      R"({"pet":{"kind":"cat"},"when":"any text","pets":[]})"));
  EXPECT_FALSE(Accepts(pydantic, R"({"pet":{"kind":"cow"},"when":""})"));
  EXPECT_FALSE(Accepts(pydantic, R"({"pet":{"kind":"cat","x":1},"when":""})"));
  const CompiledSchema merged = Compile(R"({
    "definitions": {"Named": {"type": "object",
                              "properties": {"name": {"type": "string"}},
                              "required": ["name"]}},
    "allOf": [{"$ref": "#/definitions/Named"},
              {"type": "object", "properties": {"age": {"type": "integer"}},
               "required": ["age"], "additionalProperties": false}]})");
  EXPECT_TRUE(Accepts(merged, R"({"name":"a","age":3})"));
  EXPECT_FALSE(Accepts(merged, R"({"name":"a"})"));
  EXPECT_FALSE(Accepts(merged, R"({"name":"a","age":3,"x":1})"));
  for (const auto& [bad, needle] :
       std::vector<std::pair<const char*, const char*>>{
           {R"({"$defs":{"N":{"type":"object","properties":{
                "next":{"$ref":"#/$defs/N"}}}},"$ref":"#/$defs/N"})",
            "refers back to itself"},
           {R"({"$ref":"#/$defs/missing"})", "names nothing"},
           {R"({"$ref":"https://example.com/s.json"})", "only references"},
           {R"({"allOf":[{"type":"string"}]})", "allOf parts must be objects"},
           {R"({"allOf":[{"properties":{"a":{"type":"string"}}},
                         {"properties":{"a":{"type":"integer"}}}]})",
            "declared differently"}}) {
    absl::StatusOr<CompiledSchema> s =
        CompiledSchema::Compile(Json::parse(bad));
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find(needle), std::string::npos)
        << s.status();
  }
  // A definition used many times over many levels is bounded work.
  std::string defs = R"({"$defs":{"d0":{"type":"integer"})";
  for (int i = 1; i <= 20; ++i) {
    defs += ",\"d" + std::to_string(i) +
            R"(":{"type":"array","items":{"anyOf":[{"$ref":"#/$defs/d)" +
            std::to_string(i - 1) + R"("},{"type":"null"}]}})";
  }
  defs += R"(},"allOf":[{"type":"object","properties":{)";
  for (int k = 0; k < 8; ++k) {
    defs += (k ? "," : "") + std::string("\"p") + std::to_string(k) +
            R"(":{"$ref":"#/$defs/d20"})";
  }
  defs += "}}]}";
  EXPECT_FALSE(CompiledSchema::Compile(Json::parse(defs)).ok());
}

TEST(JsonMatcherTest, RandomWalksWithinABudgetAlwaysCloseValid) {
  // The shortest: {"name":"","age":0,"tags":[""]}.
  RandomWalks(kPerson, 31, 600);
  // Open objects: any other key may come, the required one must.
  RandomWalks(R"({"type":"object","properties":{"a":{"type":"number"}},
                  "required":["a"]})", 7, 600);
  RandomWalks(R"({"type":"array","items":{"type":"object"},"minItems":2})", 7,
              300);
  // Enums that prefix each other, nested bounded arrays, anyOf, typed
  // additional properties. Shortest: {"n":1,"s":[[0]],"o":null}.
  RandomWalks(R"({"type":"object","properties":{"n":{"enum":[1,10,100]},
      "s":{"type":"array","items":{"type":"array","items":{"type":"integer"},
           "minItems":1,"maxItems":2},"minItems":1},
      "o":{"anyOf":[{"type":"string","minLength":3},{"type":"null"},
           {"type":"object","properties":{"x":{"type":"boolean"}},
            "required":["x"]}]}},
    "required":["n","s","o"],"additionalProperties":{"type":"integer"}})",
              26, 600);
  // Bounded numbers: the shortest is {"a":1000,"b":-1,"c":0,"d":-7}.
  RandomWalks(R"({"type":"object","properties":{
      "a":{"type":"integer","minimum":1000,"maximum":2000},
      "b":{"type":"number","exclusiveMinimum":-3,"maximum":-1},
      "c":{"type":"integer","minimum":-9007199254740991,
           "maximum":9007199254740991},
      "d":{"type":"integer","minimum":-12,"maximum":-7}},
    "required":["a","b","c","d"],"additionalProperties":false})",
              30, 600);
}

}  // namespace
}  // namespace flotilla::coordinator::constrained
