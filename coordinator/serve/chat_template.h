// Rendering chat messages into prompt text. The checkpoint's Jinja
// chat_template is not executed; it is recognised by its markers and the
// matching template below is used, or `--chat-template NAME` picks one:
//
//   kimi    [BOS]<|open|>ROLE<|sep|>CONTENT<|close|>... then
//           <|open|>assistant<|sep|>  (Kimi K3's XTML markers)
//   chatml  <|im_start|>ROLE\nCONTENT<|im_end|>\n... then
//           <|im_start|>assistant\n   (Qwen and others)
//   llama2  [INST] <<SYS>>\nSYSTEM\n<</SYS>>\n\nUSER [/INST] ASSISTANT </s><s>
//           [INST] ... (the tokenizer adds the first <s>)
//   plain   every message's content on its own line, roles dropped: for
//           models without a chat format (the stories model continues the
//           text)
#ifndef FLOTILLA_COORDINATOR_SERVE_CHAT_TEMPLATE_H_
#define FLOTILLA_COORDINATOR_SERVE_CHAT_TEMPLATE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/serve/completion_request.h"

namespace flotilla::coordinator::serve {

enum class ChatTemplate { kKimi, kChatMl, kLlama2, kPlain };

const char* ChatTemplateName(ChatTemplate t);
// "kimi", "chatml", "llama2", "plain"; InvalidArgument listing them else.
absl::StatusOr<ChatTemplate> ParseChatTemplate(const std::string& name);
// The template a model folder's tokenizer_config.json chat_template
// describes; `family_default` (the model family's, shared/family/family.h)
// when it has none or none is recognised.
ChatTemplate DetectChatTemplate(const std::string& model_dir,
                                ChatTemplate family_default);

std::string RenderChat(ChatTemplate t, const std::vector<ChatMessage>& m);

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_CHAT_TEMPLATE_H_
