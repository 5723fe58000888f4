#include "coordinator/serve/chat_template.h"


#include "absl/strings/str_cat.h"

namespace flotilla::coordinator::serve {

const char* ChatTemplateName(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::kKimi:
      return "kimi";
    case ChatTemplate::kChatMl:
      return "chatml";
    case ChatTemplate::kLlama2:
      return "llama2";
    case ChatTemplate::kPlain:
      return "plain";
  }
  return "?";
}

absl::StatusOr<ChatTemplate> ParseChatTemplate(const std::string& name) {
  for (ChatTemplate t : {ChatTemplate::kKimi, ChatTemplate::kChatMl,
                         ChatTemplate::kLlama2, ChatTemplate::kPlain}) {
    if (name == ChatTemplateName(t)) return t;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown chat template '", name, "' (kimi, chatml, llama2, plain)"));
}

std::string RenderChat(ChatTemplate t, const std::vector<ChatMessage>& m) {
  std::string out;
  switch (t) {
    case ChatTemplate::kKimi:
      out = "[BOS]";
      for (const ChatMessage& msg : m) {
        absl::StrAppend(&out, "<|open|>", msg.role, "<|sep|>", msg.content,
                        "<|close|>");
      }
      absl::StrAppend(&out, "<|open|>assistant<|sep|>");
      return out;
    case ChatTemplate::kChatMl:
      for (const ChatMessage& msg : m) {
        absl::StrAppend(&out, "<|im_start|>", msg.role, "\n", msg.content,
                        "<|im_end|>\n");
      }
      absl::StrAppend(&out, "<|im_start|>assistant\n");
      return out;
    case ChatTemplate::kLlama2: {
      std::string system;
      for (const ChatMessage& msg : m) {
        if (msg.role == "system" || msg.role == "developer") {
          system = msg.content;
        } else if (msg.role == "user") {
          if (!out.empty()) out += "<s>";
          out += "[INST] ";
          if (!system.empty()) {
            absl::StrAppend(&out, "<<SYS>>\n", system, "\n<</SYS>>\n\n");
            system.clear();
          }
          absl::StrAppend(&out, msg.content, " [/INST]");
        } else {
          absl::StrAppend(&out, " ", msg.content, " </s>");
        }
      }
      return out;
    }
    case ChatTemplate::kPlain:
      for (size_t i = 0; i < m.size(); ++i) {
        if (i > 0) out += "\n";
        out += m[i].content;
      }
      return out;
  }
  return out;
}

}  // namespace flotilla::coordinator::serve
