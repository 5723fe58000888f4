#include "coordinator/serve/chat_format.h"

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/model/json_util.h"

namespace flotilla::coordinator::serve {
namespace {

using Json = nlohmann::ordered_json;

// A special token as tokenizer_config.json writes it: a string or an
// AddedToken object with a "content".
std::string TokenText(const Json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string()) {
    return j["content"].get<std::string>();
  }
  return "";
}

ToolSyntax DetectToolSyntax(const std::string& source) {
  // Kimi K3's template writes its XTML channels and calls.
  if (absl::StrContains(source, "<|open|>") &&
      absl::StrContains(source, "<|close|>")) {
    return ToolSyntax::kXtml;
  }
  // gpt-oss's template writes harmony messages.
  if (absl::StrContains(source, "<|channel|>")) return ToolSyntax::kHarmony;
  if (absl::StrContains(source, "<｜tool▁calls▁begin｜>")) {
    return ToolSyntax::kDeepSeekV3;
  }
  // Kimi K2's templates: K2-Thinking writes calls back in the section
  // syntax; the first K2 template only declares the tools, and K2 answers
  // in the same syntax.
  if (absl::StrContains(source, "<|tool_calls_section_begin|>") ||
      absl::StrContains(source, "<|im_system|>tool_declare")) {
    return ToolSyntax::kKimiK2;
  }
  if (absl::StrContains(source, "<tool_call>")) return ToolSyntax::kHermes;
  if (absl::StrContains(source, "<|python_tag|>") ||
      absl::StrContains(source, "\"parameters\": dictionary")) {
    return ToolSyntax::kLlama3Json;
  }
  return ToolSyntax::kNone;
}

}  // namespace

const char* ToolSyntaxName(ToolSyntax s) {
  switch (s) {
    case ToolSyntax::kNone:
      return "none";
    case ToolSyntax::kHermes:
      return "hermes";
    case ToolSyntax::kLlama3Json:
      return "llama3_json";
    case ToolSyntax::kDeepSeekV3:
      return "deepseek_v3";
    case ToolSyntax::kKimiK2:
      return "kimi_k2";
    case ToolSyntax::kHarmony:
      return "openai";
    case ToolSyntax::kXtml:
      return "kimi_k3";
  }
  return "?";
}

absl::StatusOr<ToolSyntax> ParseToolSyntax(const std::string& name) {
  for (ToolSyntax s :
       {ToolSyntax::kNone, ToolSyntax::kHermes, ToolSyntax::kLlama3Json,
        ToolSyntax::kDeepSeekV3, ToolSyntax::kKimiK2, ToolSyntax::kHarmony,
        ToolSyntax::kXtml}) {
    if (name == ToolSyntaxName(s)) return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown tool-call syntax '", name,
                   "' (hermes, llama3_json, deepseek_v3, kimi_k2, openai, "
                   "kimi_k3, none)"));
}

ChatFormat ChatFormat::BuiltIn(ChatTemplate t) {
  ChatFormat f;
  f.built_in_ = t;
  f.tool_syntax_ = ToolSyntax::kHermes;  // how WithHermesTools asks for calls
  f.description_ = absl::StrCat(ChatTemplateName(t), " (built in)");
  return f;
}

absl::StatusOr<ChatFormat> ChatFormat::Load(const std::string& dir,
                                            ChatTemplate family_default,
                                            const std::string& override_name) {
  Json config = Json::object();
  const std::string config_path = dir + "/tokenizer_config.json";
  if (std::filesystem::exists(config_path)) {
    FLOTILLA_ASSIGN_OR_RETURN(std::string text,
                              model::internal::ReadSmallFile(config_path));
    // The guarded parser, as for every config: it names the position of a
    // syntax error and refuses duplicate keys and absurd nesting.
    FLOTILLA_ASSIGN_OR_RETURN(
        config, model::internal::ParseOrderedJson(text, config_path));
    if (!config.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(config_path, ": not a JSON object"));
    }
  }
  std::string source, origin;
  if (!override_name.empty()) {
    if (absl::StatusOr<ChatTemplate> t = ParseChatTemplate(override_name);
        t.ok()) {
      return BuiltIn(*t);
    }
    if (!std::filesystem::is_regular_file(override_name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", override_name,
                       "' is neither a built-in template (kimi, chatml, "
                       "llama2, plain) nor a Jinja file"));
    }
    FLOTILLA_ASSIGN_OR_RETURN(source,
                              model::internal::ReadSmallFile(override_name));
    origin = override_name;
  } else if (config.contains("chat_template")) {
    const Json& t = config["chat_template"];
    if (t.is_string()) {
      source = t.get<std::string>();
    } else if (t.is_array()) {  // named templates: the "default" one
      for (const Json& named : t) {
        if (named.is_object() && named.value("name", Json()) == "default" &&
            named.contains("template") && named["template"].is_string()) {
          source = named["template"].get<std::string>();
        }
      }
    }
    if (source.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(config_path,
                       ": chat_template is neither a string nor a list "
                       "holding a \"default\" template"));
    }
    origin = "tokenizer_config.json";
  } else if (std::filesystem::is_regular_file(dir + "/chat_template.jinja")) {
    FLOTILLA_ASSIGN_OR_RETURN(
        source, model::internal::ReadSmallFile(dir + "/chat_template.jinja"));
    origin = "chat_template.jinja";
  } else {
    return BuiltIn(family_default);
  }
  absl::StatusOr<jinja::Template> parsed = jinja::Template::Parse(source);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the chat template in ", origin, ": ", parsed.status().message()));
  }
  ChatFormat f;
  f.jinja_ = std::make_shared<const jinja::Template>(*std::move(parsed));
  f.bos_token_ = TokenText(config.value("bos_token", Json()));
  f.eos_token_ = TokenText(config.value("eos_token", Json()));
  f.tool_syntax_ = DetectToolSyntax(source);
  f.think_tags_ = absl::StrContains(source, "<think>");
  f.description_ = absl::StrCat("jinja (", origin, ")");
  return f;
}

absl::StatusOr<std::string> ChatFormat::Render(const CompletionRequest& request,
                                               size_t max_bytes) const {
  absl::StatusOr<std::string> text = RenderUncapped(request, max_bytes);
  if (text.ok() && text->size() > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the conversation's prompt is ", text->size(),
                     " bytes; the limit is ", max_bytes));
  }
  return text;
}

absl::StatusOr<std::string> ChatFormat::RenderUncapped(
    const CompletionRequest& request, size_t max_bytes) const {
  if (jinja_ == nullptr) {
    const bool tools = request.tools.is_array() && !request.tools.empty();
    bool tool_turns = false;
    for (const ChatMessage& m : request.messages) {
      tool_turns |= m.role == "tool" || !m.tool_calls.empty();
    }
    if (!tools && !tool_turns) return RenderChat(built_in_, request.messages);
    return RenderChat(
        built_in_,
        WithHermesTools(request, built_in_ == ChatTemplate::kChatMl));
  }
  Json messages = Json::array();
  for (const ChatMessage& m : request.messages) messages.push_back(m.view);
  Json context = {
      {"messages", std::move(messages)}, {"tools", request.tools},
      {"documents", request.documents},  {"add_generation_prompt", true},
      {"bos_token", bos_token_},         {"eos_token", eos_token_}};
  for (auto it = request.template_kwargs.begin();
       it != request.template_kwargs.end(); ++it) {
    context[it.key()] = it.value();
  }
  jinja::RenderOptions options;
  options.max_output_bytes = max_bytes;
  absl::StatusOr<std::string> text =
      jinja_->Render(jinja::Value::FromJson(context), options);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(jinja::IsRaisedError(text.status())
                         ? "the chat template refused the conversation: "
                         : "the chat template failed on this conversation: ",
                     text.status().message()));
  }
  return text;
}

std::vector<ChatMessage> WithHermesTools(const CompletionRequest& request,
                                         bool tool_role) {
  std::vector<ChatMessage> out;
  if (request.tools.is_array() && !request.tools.empty()) {
    std::string preamble = "# Tools\n<tools>\n";
    for (const Json& tool : request.tools) {
      absl::StrAppend(&preamble, tool.dump(), "\n");
    }
    absl::StrAppend(&preamble,
                    "</tools>\nTo call tools, reply with one block per call:\n"
                    "<tool_call>\n{\"name\": NAME, \"arguments\": "
                    "{...}}\n</tool_call>");
    ChatMessage system;
    system.role = "system";
    system.content = preamble;
    const bool has_system =
        !request.messages.empty() && (request.messages[0].role == "system" ||
                                      request.messages[0].role == "developer");
    if (has_system) {
      system.content =
          absl::StrCat(request.messages[0].content, "\n\n", preamble);
    }
    out.push_back(std::move(system));
    out.insert(out.end(), request.messages.begin() + (has_system ? 1 : 0),
               request.messages.end());
  } else {
    out = request.messages;
  }
  for (ChatMessage& m : out) {
    if (m.role == "assistant") {
      for (const ToolCall& call : m.tool_calls) {
        const Json args = Json::parse(call.arguments, nullptr, false);
        const Json body = {
            {"name", call.name},
            {"arguments", args.is_discarded() ? Json(call.arguments) : args}};
        absl::StrAppend(&m.content, m.content.empty() ? "" : "\n",
                        "<tool_call>\n", body.dump(), "\n</tool_call>");
      }
    } else if (m.role == "tool") {
      m.role = tool_role ? "tool" : "user";
      m.content =
          absl::StrCat("<tool_response>\n", m.content, "\n</tool_response>");
    }
  }
  return out;
}

}  // namespace flotilla::coordinator::serve
