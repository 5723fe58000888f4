// A chat reply's text split the way the API returns it: reasoning (between
// <think> tags) apart from content, and tool calls (in the model's own
// syntax, or the constrained JSON of a forced tool_choice) as tool_calls
// with JSON arguments. Fed piece by piece as tokens arrive, it answers
// deltas for streaming; text that may still turn out to be a tag or a call
// is held back until it is known.
#ifndef FLOTILLA_COORDINATOR_SERVE_CHAT_OUTPUT_H_
#define FLOTILLA_COORDINATOR_SERVE_CHAT_OUTPUT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "coordinator/serve/chat_format.h"
#include "coordinator/serve/completion_request.h"
#include "shared/tokenizer/tokenizer.h"

namespace flotilla::coordinator::serve {

struct ToolCallDelta {
  int index = 0;
  std::string id, name;   // set on a call's first delta only
  std::string arguments;  // the next piece of the arguments' JSON text
};

struct ChatDelta {
  std::string reasoning, content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const {
    return reasoning.empty() && content.empty() && tool_calls.empty();
  }
};

struct ChatOutputOptions {
  ToolSyntax syntax = ToolSyntax::kNone;  // how calls are parsed in auto mode
  bool parse_tools = false;  // tools were offered and tool_choice is auto
  bool think_tags = false;
  bool starts_in_reasoning = false;       // the prompt ends inside <think>
  ToolChoice forced = ToolChoice::kAuto;  // kNamed / kRequired: JSON output
  std::string forced_name;
  // ToolSyntax::kHarmony (gpt-oss): replies are harmony messages, parsed
  // from their ids with this tokenizer (harmony_output.h); the text fed is
  // then not read.
  const tokenizer::Tokenizer* harmony = nullptr;
  // ToolSyntax::kXtml (Kimi K3): the channel the prompt opened ("think",
  // "response" or ""), and whether the output is held to a JSON schema
  // (then it is read as plain content, not as channels).
  std::string xtml_channel;
  bool constrained = false;
};

class HarmonyOutput;
class XtmlOutput;

class ChatOutput {
 public:
  explicit ChatOutput(ChatOutputOptions options);
  ~ChatOutput();

  ChatDelta Feed(absl::string_view text);
  // The next text and the ids it was decoded from (harmony reads the ids).
  ChatDelta Feed(absl::string_view text, const std::vector<int32_t>& ids);
  // The end of the reply: what was held back, and the tool calls parsed.
  ChatDelta Finish();

  const std::string& content() const;
  const std::string& reasoning() const;
  const std::vector<ToolCall>& tool_calls() const;

 private:
  void FeedContent(absl::string_view text, ChatDelta* d);
  // Parses the held text as calls in the model's syntax; false leaves it
  // to be content.
  bool ParseCalls(const std::string& text);

  ChatOutputOptions options_;
  enum class Stage { kStart, kReasoning, kContent } stage_;
  bool held_calls_ = false;    // a call has begun: the rest is held
  bool decided_ = false;       // llama3_json: the first byte was seen
  bool content_lead_ = false;  // after </think>: whitespace is dropped
  std::string pending_;        // held back
  std::string content_, reasoning_;
  std::vector<ToolCall> calls_;
  std::unique_ptr<HarmonyOutput> harmony_;  // with options_.harmony
  std::unique_ptr<XtmlOutput> xtml_;        // ToolSyntax::kXtml, free output
};

// "call_" and 24 random letters and digits.
std::string NewToolCallId();

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_CHAT_OUTPUT_H_
