#include "coordinator/serve/tool_call_syntax.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "coordinator/serve/chat_output.h"
#include "nlohmann/json.hpp"

namespace flotilla::coordinator::serve {
namespace {

using Json = nlohmann::ordered_json;

// Whether `text` is one JSON value (the arguments must be).
bool IsJson(absl::string_view text) {
  return !Json::parse(text, nullptr, false).is_discarded();
}

// The arguments as the API carries them: the JSON text, re-serialised.
std::string ArgumentsText(absl::string_view text) {
  return Json::parse(text, nullptr, false).dump();
}

// Hermes: <tool_call>{"name": ..., "arguments": {...}}</tool_call>, repeated.
bool ParseHermes(absl::string_view rest, std::vector<ToolCall>* calls) {
  constexpr absl::string_view kOpen = "<tool_call>", kClose = "</tool_call>";
  while (true) {
    rest = absl::StripLeadingAsciiWhitespace(rest);
    if (rest.empty()) return !calls->empty();
    if (!absl::ConsumePrefix(&rest, kOpen)) return false;
    const size_t close = rest.find(kClose);
    const Json j = Json::parse(
        absl::StripAsciiWhitespace(rest.substr(0, close)), nullptr, false);
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) {
      return false;
    }
    const Json args = j.contains("arguments")    ? j["arguments"]
                      : j.contains("parameters") ? j["parameters"]
                                                 : Json::object();
    calls->push_back(
        {NewToolCallId(), j["name"].get<std::string>(),
         args.is_string() ? args.get<std::string>() : args.dump()});
    if (close == absl::string_view::npos) return true;
    rest.remove_prefix(close + kClose.size());
  }
}

// The text of `rest` up to `marker` (all of it when absent), consumed with
// the marker.
absl::string_view TakeUntil(absl::string_view* rest, absl::string_view marker) {
  const size_t at = rest->find(marker);
  const absl::string_view head = rest->substr(0, at);
  rest->remove_prefix(at == absl::string_view::npos ? rest->size()
                                                    : at + marker.size());
  return head;
}

// A section of calls: `begin`, then calls each `call` ... `call_end`,
// until `end` or the text's end. Each call's text is split at `sep` into a
// head and the rest; `make` turns them into a call, or false.
struct Markers {
  absl::string_view begin, end, call, call_end, sep;
};
using MakeCall = bool (*)(absl::string_view head, absl::string_view rest,
                          ToolCall* call);

bool ParseSection(absl::string_view rest, const Markers& m, MakeCall make,
                  std::vector<ToolCall>* calls) {
  if (!absl::ConsumePrefix(&rest, m.begin)) return false;
  while (true) {
    rest = absl::StripLeadingAsciiWhitespace(rest);
    if (rest.empty() || absl::StartsWith(rest, m.end)) break;
    if (!absl::ConsumePrefix(&rest, m.call)) return false;
    absl::string_view call = TakeUntil(&rest, m.call_end);
    const absl::string_view head = TakeUntil(&call, m.sep);
    ToolCall out;
    if (!make(head, call, &out)) return false;
    calls->push_back(std::move(out));
  }
  return !calls->empty();
}

// DeepSeek-V3 / R1: function<sep>NAME\n```json\nARGS\n```; V3.1:
// NAME<sep>ARGS.
bool MakeDeepSeekCall(absl::string_view head, absl::string_view rest,
                      ToolCall* call) {
  absl::string_view name = absl::StripAsciiWhitespace(head), args = rest;
  if (name == "function") {
    const size_t nl = rest.find('\n');
    name = absl::StripAsciiWhitespace(rest.substr(0, nl));
    args = nl == absl::string_view::npos ? "" : rest.substr(nl + 1);
    args = absl::StripAsciiWhitespace(args);
    absl::ConsumePrefix(&args, "```json");
    absl::ConsumeSuffix(&args, "```");
  }
  args = absl::StripAsciiWhitespace(args);
  if (name.empty() || !IsJson(args)) return false;
  *call = {NewToolCallId(), std::string(name), ArgumentsText(args)};
  return true;
}

// Kimi K2: functions.NAME:INDEX<argument_begin>ARGS, the head its id.
bool MakeKimiCall(absl::string_view head, absl::string_view rest,
                  ToolCall* call) {
  const absl::string_view id = absl::StripAsciiWhitespace(head);
  absl::string_view name = id;
  absl::ConsumePrefix(&name, "functions.");
  const size_t colon = name.rfind(':');
  if (colon != absl::string_view::npos) name = name.substr(0, colon);
  const absl::string_view args = absl::StripAsciiWhitespace(rest);
  if (name.empty() || !IsJson(args)) return false;
  *call = {std::string(id), std::string(name), ArgumentsText(args)};
  return true;
}

bool ParseDeepSeekV3(absl::string_view rest, std::vector<ToolCall>* calls) {
  return ParseSection(
      rest,
      {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>",
       "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"},
      &MakeDeepSeekCall, calls);
}

bool ParseKimiK2(absl::string_view rest, std::vector<ToolCall>* calls) {
  return ParseSection(rest,
                      {"<|tool_calls_section_begin|>",
                       "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                       "<|tool_call_end|>", "<|tool_call_argument_begin|>"},
                      &MakeKimiCall, calls);
}

constexpr SectionSyntax kHermes = {"<tool_call>", &ParseHermes};
constexpr SectionSyntax kDeepSeekV3 = {"<｜tool▁calls▁begin｜>",
                                       &ParseDeepSeekV3};
constexpr SectionSyntax kKimiK2 = {"<|tool_calls_section_begin|>",
                                   &ParseKimiK2};

}  // namespace

const SectionSyntax* SectionSyntaxOf(ToolSyntax syntax) {
  switch (syntax) {
    case ToolSyntax::kHermes:
      return &kHermes;
    case ToolSyntax::kDeepSeekV3:
      return &kDeepSeekV3;
    case ToolSyntax::kKimiK2:
      return &kKimiK2;
    case ToolSyntax::kNone:
    case ToolSyntax::kLlama3Json:
    case ToolSyntax::kHarmony:  // parsed from ids (harmony_output.h)
    case ToolSyntax::kXtml:     // parsed by channel (xtml_output.h)
      return nullptr;
  }
  return nullptr;
}

}  // namespace flotilla::coordinator::serve
