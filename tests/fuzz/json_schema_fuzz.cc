// Schemas come from requests: any JSON must compile or be refused, and the
// matcher must take any bytes after it (a text after the first NUL of the
// input) without crashing, its MinBytesToEnd defined at every step. Also
// Anthropic and Responses request bodies, translated and parsed.
//
// A schema that compiles must also be one some value satisfies (issue 44:
// {"type": []} or {"type": "string", "const": 5} were accepted and answered
// with invalid JSON): a walk that takes, at each step, a byte the matcher
// accepts and that still lets the value close within its budget (the
// input's text picks among them) must end in a complete value that parses
// and has the root's type and enum/const. Anything else traps.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "coordinator/constrained/json_matcher.h"
#include "coordinator/serve/anthropic_request.h"
#include "coordinator/serve/completion_request.h"
#include "coordinator/serve/responses_request.h"
#include "nlohmann/json.hpp"

namespace {

using flotilla::coordinator::constrained::CompiledSchema;
using flotilla::coordinator::constrained::JsonMatcher;
using Json = nlohmann::ordered_json;

// Whether `v` has one of the root's types and is one of its enum/const
// values (the keywords every schema of the issue broke).
bool RootHolds(const Json& schema, const Json& v) {
  if (!schema.is_object()) return true;
  if (const auto c = schema.find("const"); c != schema.end() && *c != v) {
    return false;
  }
  if (const auto e = schema.find("enum"); e != schema.end() && e->is_array()) {
    bool found = false;
    for (const Json& x : *e) found = found || x == v;
    if (!found) return false;
  }
  const auto t = schema.find("type");
  if (t == schema.end()) return true;
  const Json types = t->is_array() ? *t : Json::array({*t});
  for (const Json& type : types) {
    if ((type == "object" && v.is_object()) ||
        (type == "array" && v.is_array()) ||
        (type == "string" && v.is_string()) ||
        (type == "number" && v.is_number()) ||
        (type == "integer" &&
         (v.is_number_integer() ||
          (v.is_number_float() &&
           std::floor(v.get<double>()) == v.get<double>()))) ||
        (type == "boolean" && v.is_boolean()) ||
        (type == "null" && v.is_null())) {
      return true;
    }
  }
  return false;
}

// The walk described above; traps when the matcher cannot finish a value
// or finishes one the schema does not hold.
void WalkToAValue(const Json& schema, const CompiledSchema& s,
                  const std::string& choices) {
  // Every byte a value may hold (enum strings may use any of them, DEL
  // included: the walk offers only what the matcher takes).
  static const std::string kAlphabet = [] {
    std::string a;
    for (int c = 0x20; c < 0x100; ++c) a += static_cast<char>(c);
    return a;
  }();
  JsonMatcher m(&s);
  const int64_t budget = m.MinBytesToEnd() + 32;
  if (budget > 288) return;  // long minimums: too slow to walk here
  std::string text;
  size_t pick = 0;
  while (!m.Done()) {
    const unsigned char choice =
        pick < choices.size() ? static_cast<unsigned char>(choices[pick]) : 0;
    ++pick;
    if (m.CanEnd() && (choice % 4 == 0 || pick > choices.size())) break;
    std::string options;
    for (char c : kAlphabet) {
      JsonMatcher next = m;
      if (next.Feed(c) && next.MinBytesToEnd() <=
                              budget - static_cast<int64_t>(text.size()) - 1) {
        options += c;
      }
    }
    if (options.empty()) {
      if (m.CanEnd()) break;
      std::fprintf(stderr, "walk stuck after %s\n", text.c_str());
      __builtin_trap();  // a compiled schema the matcher cannot finish
    }
    const char c = options[choice % options.size()];
    if (!m.Feed(c)) __builtin_trap();
    text += c;
  }
  const Json value = Json::parse(text, nullptr, false);
  if (value.is_discarded() || !RootHolds(schema, value)) {
    std::fprintf(stderr, "walk ended in %s\n", text.c_str());
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string schema_text = input.substr(0, split);
  const std::string text =
      split == std::string::npos ? "" : input.substr(split + 1);
  const Json schema = Json::parse(schema_text, nullptr, false);
  if (!schema.is_discarded()) {
    absl::StatusOr<CompiledSchema> s = CompiledSchema::Compile(schema);
    if (s.ok()) {
      JsonMatcher m(&*s);
      for (char c : text) {
        (void)m.MinBytesToEnd();
        if (!m.Feed(c)) break;
      }
      (void)m.CanEnd();
      WalkToAValue(schema, *s, text);
    }
  }
  auto chat = flotilla::coordinator::serve::AnthropicToChat(schema_text, false);
  if (chat.ok()) {
    (void)flotilla::coordinator::serve::ParseCompletionRequestJson(
        *chat, true, flotilla::coordinator::serve::RequestLimits());
  }
  // The Responses API's request (Codex's) the same way.
  auto responses = flotilla::coordinator::serve::ResponsesToChat(schema_text);
  if (responses.ok()) {
    (void)flotilla::coordinator::serve::ParseCompletionRequestJson(
        responses->chat, true, flotilla::coordinator::serve::RequestLimits());
  }
  return 0;
}
