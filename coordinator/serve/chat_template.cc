#include "coordinator/serve/chat_template.h"

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "shared/model/json_util.h"

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

ChatTemplate DetectChatTemplate(const std::string& dir,
                                ChatTemplate family_default) {
  std::ifstream in(dir + "/tokenizer_config.json");
  std::string text;
  if (in) {
    std::stringstream ss;
    ss << in.rdbuf();
    absl::StatusOr<nlohmann::json> parsed =
        model::internal::ParseJson(ss.str(), "tokenizer_config.json");
    const nlohmann::json j = parsed.ok() ? *std::move(parsed) : nullptr;
    if (j.is_object() && j.contains("chat_template") &&
        j["chat_template"].is_string()) {
      text = j["chat_template"].get<std::string>();
    }
  }
  if (absl::StrContains(text, "<|open|>")) return ChatTemplate::kKimi;
  if (absl::StrContains(text, "<|im_start|>")) return ChatTemplate::kChatMl;
  if (absl::StrContains(text, "[INST]")) return ChatTemplate::kLlama2;
  return family_default;
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
