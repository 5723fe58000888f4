// How a chat request becomes prompt text, and how the reply's text is read
// back: the checkpoint's own Jinja chat template (tokenizer_config.json's
// chat_template, or chat_template.jinja) rendered as transformers renders
// it, or, for a checkpoint without one, a built-in template
// (chat_template.h) that renders tools in the Hermes style. The template's
// text also says how the model writes tool calls (ToolSyntax) and whether
// it thinks between <think> tags.
#ifndef FLOTILLA_COORDINATOR_SERVE_CHAT_FORMAT_H_
#define FLOTILLA_COORDINATOR_SERVE_CHAT_FORMAT_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/serve/chat_template.h"
#include "coordinator/serve/completion_request.h"
#include "shared/jinja/template.h"

namespace flotilla::coordinator::serve {

// How the model writes a tool call when it chooses to (tool_choice auto).
enum class ToolSyntax {
  kNone,        // not parsed: the text is returned as content
  kHermes,      // <tool_call>{"name": ..., "arguments": {...}}</tool_call>
  kLlama3Json,  // {"name": ..., "parameters": {...}} as the whole reply
  kDeepSeekV3,  // <｜tool▁calls▁begin｜> sections (tool_call_syntax.h)
  kKimiK2,      // <|tool_calls_section_begin|> sections (tool_call_syntax.h)
  kHarmony,     // gpt-oss's harmony messages (harmony_output.h): channels
                // analysis / final, calls to=functions.NAME
  kXtml,        // Kimi K3's XTML channels (xtml_output.h): think, response,
                // tools with call / argument / json
};
const char* ToolSyntaxName(ToolSyntax s);
// "hermes", "llama3_json", "deepseek_v3", "kimi_k2", "openai" (harmony),
// "kimi_k3" (XTML), "none" (vLLM's --tool-call-parser names where vLLM has
// one).
absl::StatusOr<ToolSyntax> ParseToolSyntax(const std::string& name);

class ChatFormat {
 public:
  // The chat format of a model folder. `override_name` (--chat-template):
  // empty = the folder's Jinja template, else the family's built-in
  // `family_default`; a built-in name (kimi, chatml, llama2, plain); or the
  // path of a Jinja file. Errors name the file and the template line.
  static absl::StatusOr<ChatFormat> Load(const std::string& model_dir,
                                         ChatTemplate family_default,
                                         const std::string& override_name);
  // A built-in template (tests, and models without a folder).
  static ChatFormat BuiltIn(ChatTemplate t);

  // The prompt for `request`'s messages and tools, ending where the
  // assistant's reply begins. InvalidArgument with the template's own
  // message when it refuses the conversation, or when the prompt would pass
  // `max_bytes` (the template stops there: a template that multiplies its
  // input never builds more).
  absl::StatusOr<std::string> Render(const CompletionRequest& request,
                                     size_t max_bytes = 64u << 20) const;

  ToolSyntax tool_syntax() const { return tool_syntax_; }
  void set_tool_syntax(ToolSyntax s) { tool_syntax_ = s; }
  // Whether replies put their reasoning between <think> and </think>.
  bool think_tags() const { return think_tags_; }
  // For the startup line: "jinja (tokenizer_config.json)" or "chatml".
  const std::string& description() const { return description_; }

 private:
  // Render() before its final size check (the Jinja render stops at
  // max_bytes on its own; the built-in formats are bounded by their input).
  absl::StatusOr<std::string> RenderUncapped(const CompletionRequest& request,
                                             size_t max_bytes) const;
  std::shared_ptr<const jinja::Template> jinja_;  // null: built-in
  ChatTemplate built_in_ = ChatTemplate::kPlain;
  std::string bos_token_, eos_token_;
  ToolSyntax tool_syntax_ = ToolSyntax::kHermes;
  bool think_tags_ = false;
  std::string description_;
};

// The built-in templates with tools: the tool list and the Hermes call
// syntax go into the system message, assistant calls are written as
// <tool_call> blocks and tool results as <tool_response> blocks.
std::vector<ChatMessage> WithHermesTools(const CompletionRequest& request,
                                         bool tool_role);

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_CHAT_FORMAT_H_
