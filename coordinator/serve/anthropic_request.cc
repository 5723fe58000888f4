#include "coordinator/serve/anthropic_request.h"

#include "absl/strings/str_cat.h"
#include "coordinator/serve/request_errors.h"
#include "shared/base/status_macros.h"
#include "shared/model/json_util.h"

namespace flotilla::coordinator::serve {
namespace {

using Json = nlohmann::ordered_json;

using internal::Bad;
using internal::StringField;

// Text of a content that is a string or a list of text blocks.
absl::StatusOr<std::string> TextOf(const Json& content, const std::string& at) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return Bad(at + " must be a string or a list of blocks");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& b = content[i];
    const std::string here = absl::StrCat(at, "[", i, "]");
    if (StringField(b, "type") != "text" ||
        !b.contains("text") || !b["text"].is_string()) {
      return Bad(absl::StrCat(here, ": only text blocks are supported here"));
    }
    text += b["text"].get<std::string>();
  }
  return text;
}

// One entry of `messages` into chat messages (`out`); a "system" entry
// (Claude Code sends them) is added to `system` instead, in order.
absl::Status Message(const Json& m, size_t index, Json* out,
                     std::string* system) {
  const std::string at = absl::StrCat("messages.", index);
  if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
      !m.contains("content")) {
    return Bad(at + ": must be an object with a role and a content");
  }
  const std::string role = m["role"].get<std::string>();
  if (role == "system") {
    FLOTILLA_ASSIGN_OR_RETURN(std::string text,
                              TextOf(m["content"], at + ".content"));
    if (!system->empty() && !text.empty()) *system += "\n\n";
    *system += text;
    return absl::OkStatus();
  }
  if (role != "user" && role != "assistant") {
    return Bad(at + ".role: must be \"user\", \"assistant\" or \"system\"");
  }
  for (auto it = m.begin(); it != m.end(); ++it) {
    if (it.key() != "role" && it.key() != "content") {
      return Bad(absl::StrCat(at, ".", it.key(), ": Extra inputs are not permitted"));
    }
  }
  const Json& content = m["content"];
  if (content.is_string()) {
    out->push_back({{"role", role}, {"content", content}});
    return absl::OkStatus();
  }
  if (!content.is_array()) return Bad(at + ".content: must be a string or a list");
  std::string text, reasoning;
  Json calls = Json::array();
  Json results = Json::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& b = content[i];
    const std::string here = absl::StrCat(at, ".content.", i);
    const std::string type = StringField(b, "type");
    if (type == "text") {
      if (!b.contains("text") || !b["text"].is_string()) {
        return Bad(here + ".text: must be a string");
      }
      text += b["text"].get<std::string>();
    } else if (type == "tool_use" && role == "assistant") {
      if (!b.contains("id") || !b["id"].is_string() || !b.contains("name") ||
          !b["name"].is_string() || !b.contains("input") || !b["input"].is_object()) {
        return Bad(here + ": a tool_use block needs an id, a name and an input object");
      }
      calls.push_back({{"id", b["id"]},
                       {"type", "function"},
                       {"function", {{"name", b["name"]}, {"arguments", b["input"].dump()}}}});
    } else if (type == "tool_result" && role == "user") {
      if (!b.contains("tool_use_id") || !b["tool_use_id"].is_string()) {
        return Bad(here + ".tool_use_id: must be a string");
      }
      FLOTILLA_ASSIGN_OR_RETURN(
          std::string result,
          b.contains("content") ? TextOf(b["content"], here + ".content")
                                : absl::StatusOr<std::string>(std::string()));
      if (b.contains("is_error") && b["is_error"] == true) {
        result = "Error: " + result;
      }
      results.push_back({{"role", "tool"}, {"tool_call_id", b["tool_use_id"]},
                         {"content", result}});
    } else if (type == "thinking" && role == "assistant") {
      if (b.contains("thinking") && b["thinking"].is_string()) {
        reasoning += b["thinking"].get<std::string>();
      }
    } else if (type == "redacted_thinking" && role == "assistant") {
      continue;  // opaque to this model
    } else {
      return Bad(absl::StrCat(here, ": content blocks of type '", type,
                              "' are not supported in ", role, " messages"));
    }
  }
  // Tool results answer the previous assistant turn, so they come first.
  for (Json& r : results) out->push_back(std::move(r));
  if (role == "assistant") {
    Json msg = {{"role", "assistant"}, {"content", text}};
    if (!calls.empty()) msg["tool_calls"] = std::move(calls);
    if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
    out->push_back(std::move(msg));
  } else if (!text.empty() || results.empty()) {
    out->push_back({{"role", "user"}, {"content", text}});
  }
  return absl::OkStatus();
}

// output_config: "effort" is the template's reasoning_effort (gpt-oss's
// reads it); "format" {"type": "json_schema", "schema": S} constrains the
// reply to S, as response_format does. Anything else would change the
// output without a lever here: refused naming it.
absl::Status OutputConfig(const Json& v, Json* chat, Json* kwargs) {
  if (!v.is_object()) return Bad("output_config: must be an object");
  for (auto it = v.begin(); it != v.end(); ++it) {
    const Json& value = it.value();
    if (it.key() == "effort") {
      if (!value.is_string())
        return Bad("output_config.effort: must be a string");
      (*kwargs)["reasoning_effort"] = value;
    } else if (it.key() == "format") {
      if (value.is_null()) continue;
      if (StringField(value, "type") != "json_schema" ||
          !value.contains("schema")) {
        return Bad(
            "output_config.format: must be {\"type\": \"json_schema\", "
            "\"schema\": {...}}");
      }
      (*chat)["response_format"] = {
          {"type", "json_schema"},
          {"json_schema", {{"name", "output"}, {"schema", value["schema"]}}}};
    } else {
      return Bad(absl::StrCat("output_config.", it.key(), ": not supported"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string ToolUseId(const std::string& call_id) {
  return "toolu_" + call_id.substr(call_id.find('_') + 1);
}

absl::StatusOr<Json> AnthropicToChat(absl::string_view body, bool count_only) {
  FLOTILLA_ASSIGN_OR_RETURN(
      Json j, model::internal::ParseOrderedJson(body, "the request body"));
  if (!j.is_object()) return Bad("the request body must be a JSON object");
  Json chat = Json::object();
  Json messages = Json::array();
  if (!j.contains("messages")) return Bad("messages: Field required");
  if (!j.contains("model")) return Bad("model: Field required");
  if (!count_only && !j.contains("max_tokens")) return Bad("max_tokens: Field required");
  // The system prompt: `system` (a string or text blocks), then each
  // system entry of `messages`, in order.
  std::string system;
  bool has_system = false;
  if (j.contains("system") && !j["system"].is_null()) {
    FLOTILLA_ASSIGN_OR_RETURN(system, TextOf(j["system"], "system"));
    has_system = true;
  }
  Json kwargs = Json::object();
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const Json& v = it.value();
    if (key == "system") continue;
    if (key == "messages") {
      if (!v.is_array() || v.empty()) return Bad("messages: must be a non-empty list");
      for (size_t i = 0; i < v.size(); ++i) {
        const bool system_entry = v[i].is_object() && v[i].contains("role") &&
                                  v[i]["role"] == "system";
        FLOTILLA_RETURN_IF_ERROR(Message(v[i], i, &messages, &system));
        has_system = has_system || system_entry;
      }
    } else if (key == "model" || key == "temperature" || key == "top_p" ||
               key == "top_k" || key == "stream" || key == "max_tokens") {
      chat[key] = v;
    } else if (key == "stop_sequences") {
      chat["stop"] = v;
    } else if (key == "metadata") {
      if (!v.is_object()) return Bad("metadata: must be an object");
    } else if (key == "context_management" || key == "service_tier" ||
               key == "container") {
      // Client-side bookkeeping: nothing the model generates depends on it.
    } else if (key == "output_config") {
      FLOTILLA_RETURN_IF_ERROR(OutputConfig(v, &chat, &kwargs));
    } else if (key == "tools") {
      if (!v.is_array()) return Bad("tools: must be a list");
      Json tools = Json::array();
      for (size_t i = 0; i < v.size(); ++i) {
        const Json& t = v[i];
        const std::string at = absl::StrCat("tools.", i);
        if (!t.is_object()) return Bad(at + ": a tool must be an object");
        const bool server_tool = t.contains("type") && t["type"] != "custom";
        if (!server_tool &&
            (!t.contains("name") || !t.contains("input_schema"))) {
          return Bad(at + ": a tool needs a name and an input_schema");
        }
        if (t.contains("type") && t["type"] != "custom") {
          // A server tool (web search, code execution, ...) needs a service
          // this server does not run: not offered to the model.
          continue;
        }
        Json function = {{"name", t["name"]}, {"parameters", t["input_schema"]}};
        if (t.contains("description")) function["description"] = t["description"];
        tools.push_back({{"type", "function"}, {"function", std::move(function)}});
      }
      chat["tools"] = std::move(tools);
    } else if (key == "tool_choice") {
      const std::string type = StringField(v, "type");
      if (type == "auto" || type == "none") {
        chat["tool_choice"] = type;
      } else if (type == "any") {
        chat["tool_choice"] = "required";
        // Claude may answer "any" with several tool_use blocks unless the
        // client turns that off.
        chat["parallel_tool_calls"] =
            !(v.contains("disable_parallel_tool_use") &&
              v["disable_parallel_tool_use"] == true);
      } else if (type == "tool" && v.contains("name")) {
        chat["tool_choice"] = {{"type", "function"},
                               {"function", {{"name", v["name"]}}}};
      } else {
        return Bad("tool_choice: must be {\"type\": \"auto\"|\"any\"|\"none\"} "
                   "or {\"type\": \"tool\", \"name\": ...}");
      }
    } else if (key == "thinking") {
      // A reasoning model's template reads enable_thinking (Qwen3's does);
      // other templates ignore it. budget_tokens has no lever here: the
      // model thinks until it closes its reasoning, within max_tokens.
      const std::string type = StringField(v, "type");
      if (type != "enabled" && type != "adaptive" && type != "disabled") {
        return Bad(
            "thinking.type: must be \"enabled\", \"adaptive\" or "
            "\"disabled\"");
      }
      kwargs["enable_thinking"] = type != "disabled";
    } else {
      return Bad(absl::StrCat(key, ": Extra inputs are not permitted"));
    }
  }
  if (has_system) {
    messages.insert(messages.begin(),
                    Json{{"role", "system"}, {"content", system}});
  }
  chat["messages"] = std::move(messages);
  if (!kwargs.empty()) chat["chat_template_kwargs"] = std::move(kwargs);
  if (count_only) {
    chat.erase("max_tokens");
    chat.erase("stream");
  }
  return chat;
}

}  // namespace flotilla::coordinator::serve
