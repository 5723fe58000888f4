#include "coordinator/serve/anthropic_request.h"

#include "absl/strings/str_cat.h"
#include "coordinator/serve/request_errors.h"
#include "shared/base/status_macros.h"
#include "shared/model/json_util.h"

namespace flotilla::coordinator::serve {
namespace {

using Json = nlohmann::ordered_json;

using internal::Bad;

// obj[key] when it is a string, else "" (never throws on odd types).
std::string StringField(const Json& obj, const char* key) {
  if (!obj.is_object()) return "";
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

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

absl::Status Message(const Json& m, size_t index, Json* out) {
  const std::string at = absl::StrCat("messages.", index);
  if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
      !m.contains("content")) {
    return Bad(at + ": must be an object with a role and a content");
  }
  const std::string role = m["role"].get<std::string>();
  if (role != "user" && role != "assistant") {
    return Bad(at + ".role: must be \"user\" or \"assistant\"");
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
  if (j.contains("system") && !j["system"].is_null()) {
    FLOTILLA_ASSIGN_OR_RETURN(std::string system, TextOf(j["system"], "system"));
    messages.push_back({{"role", "system"}, {"content", system}});
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const Json& v = it.value();
    if (key == "system") continue;
    if (key == "messages") {
      if (!v.is_array() || v.empty()) return Bad("messages: must be a non-empty list");
      for (size_t i = 0; i < v.size(); ++i) {
        FLOTILLA_RETURN_IF_ERROR(Message(v[i], i, &messages));
      }
    } else if (key == "model" || key == "temperature" || key == "top_p" ||
               key == "top_k" || key == "stream" || key == "max_tokens") {
      chat[key] = v;
    } else if (key == "stop_sequences") {
      chat["stop"] = v;
    } else if (key == "metadata") {
      if (!v.is_object()) return Bad("metadata: must be an object");
    } else if (key == "tools") {
      if (!v.is_array()) return Bad("tools: must be a list");
      Json tools = Json::array();
      for (size_t i = 0; i < v.size(); ++i) {
        const Json& t = v[i];
        const std::string at = absl::StrCat("tools.", i);
        if (!t.is_object() || !t.contains("name") || !t.contains("input_schema")) {
          return Bad(at + ": a tool needs a name and an input_schema");
        }
        if (t.contains("type") && t["type"] != "custom") {
          return Bad(absl::StrCat(at, ".type: server tools (", t["type"].dump(),
                                  ") are not supported; only custom tools"));
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
      } else if (type == "tool" && v.contains("name")) {
        chat["tool_choice"] = {{"type", "function"},
                               {"function", {{"name", v["name"]}}}};
      } else {
        return Bad("tool_choice: must be {\"type\": \"auto\"|\"any\"|\"none\"} "
                   "or {\"type\": \"tool\", \"name\": ...}");
      }
    } else if (key == "thinking") {
      if (StringField(v, "type") != "disabled") {
        return Bad("thinking: extended thinking budgets are not supported "
                   "(the model thinks as its chat template lets it)");
      }
    } else {
      return Bad(absl::StrCat(key, ": Extra inputs are not permitted"));
    }
  }
  chat["messages"] = std::move(messages);
  if (count_only) {
    chat.erase("max_tokens");
    chat.erase("stream");
  }
  return chat;
}

}  // namespace flotilla::coordinator::serve
