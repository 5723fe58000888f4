// The built-in chat templates, for checkpoints without a Jinja one of their
// own (chat_format.h renders those), or picked by `--chat-template NAME`:
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
std::string RenderChat(ChatTemplate t, const std::vector<ChatMessage>& m);

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_CHAT_TEMPLATE_H_
