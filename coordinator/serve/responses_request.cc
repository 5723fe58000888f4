#include "coordinator/serve/responses_request.h"

#include "absl/strings/str_cat.h"
#include "coordinator/serve/request_errors.h"
#include "shared/base/status_macros.h"
#include "shared/model/json_util.h"

namespace flotilla::coordinator::serve {
namespace {

using internal::Bad;
using internal::StringField;

// The text of a message's content: a string, or input_text / output_text
// parts joined.
absl::StatusOr<std::string> ContentPartsText(
    const nlohmann::ordered_json& content, const std::string& at) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    return Bad(at + ": must be a string or a list of content parts");
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const nlohmann::ordered_json& part = content[i];
    const std::string type = StringField(part, "type");
    if ((type == "input_text" || type == "output_text" || type == "text" ||
         type == "summary_text" || type == "reasoning_text") &&
        part.contains("text") && part["text"].is_string()) {
      text += part["text"].get<std::string>();
    } else if (type == "refusal") {
      continue;
    } else {
      return Bad(absl::StrCat(at, "[", i, "]: content parts of type '", type,
                              "' are not supported (text only)"));
    }
  }
  return text;
}

// The conversation so far: chat messages, with the system prompt gathered
// apart (instructions, then developer and system messages, in order).
struct InputConversation {
  std::string system;
  bool has_system = false;
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();

  void System(const std::string& text) {
    if (has_system && !text.empty()) system += "\n\n";
    system += text;
    has_system = true;
  }
  // The assistant message a function call joins: the last one when it is
  // the last message, else a new empty one.
  nlohmann::ordered_json& Assistant() {
    if (messages.empty() || messages.back()["role"] != "assistant") {
      messages.push_back({{"role", "assistant"}, {"content", ""}});
    }
    return messages.back();
  }
};

absl::Status InputItem(const nlohmann::ordered_json& item, size_t index,
                       InputConversation* c) {
  const std::string at = absl::StrCat("input[", index, "]");
  if (!item.is_object()) return Bad(at + ": must be an object");
  std::string type = StringField(item, "type");
  if (type.empty() && item.contains("role")) type = "message";
  if (type == "message") {
    if (!item.contains("role") || !item["role"].is_string()) {
      return Bad(at + ".role: required");
    }
    const std::string role = item["role"].get<std::string>();
    FLOTILLA_ASSIGN_OR_RETURN(
        std::string text,
        ContentPartsText(item.value("content", nlohmann::ordered_json("")),
                         at + ".content"));
    if (role == "developer" || role == "system") {
      c->System(text);
    } else if (role == "user") {
      c->messages.push_back({{"role", "user"}, {"content", text}});
    } else if (role == "assistant") {
      c->messages.push_back({{"role", "assistant"}, {"content", text}});
    } else {
      return Bad(absl::StrCat(at, ".role: '", role,
                              "' is not user, assistant, developer or system"));
    }
  } else if (type == "function_call") {
    for (const char* key : {"call_id", "name", "arguments"}) {
      if (!item.contains(key) || !item[key].is_string()) {
        return Bad(absl::StrCat(at, ".", key, ": must be a string"));
      }
    }
    nlohmann::ordered_json& assistant = c->Assistant();
    if (!assistant.contains("tool_calls")) {
      assistant["tool_calls"] = nlohmann::ordered_json::array();
    }
    assistant["tool_calls"].push_back(
        {{"id", item["call_id"]},
         {"type", "function"},
         {"function",
          {{"name", item["name"]}, {"arguments", item["arguments"]}}}});
  } else if (type == "function_call_output") {
    if (!item.contains("call_id") || !item["call_id"].is_string()) {
      return Bad(at + ".call_id: must be a string");
    }
    FLOTILLA_ASSIGN_OR_RETURN(
        std::string output,
        ContentPartsText(item.value("output", nlohmann::ordered_json("")),
                         at + ".output"));
    c->messages.push_back({{"role", "tool"},
                           {"tool_call_id", item["call_id"]},
                           {"content", output}});
  } else if (type == "reasoning") {
    // Past reasoning: nothing to feed back (its encrypted_content is
    // another server's; chat templates drop old reasoning).
  } else {
    return Bad(absl::StrCat(at, ".type: input items of type '", type,
                            "' are not supported"));
  }
  return absl::OkStatus();
}

absl::Status FunctionTools(const nlohmann::ordered_json& v,
                           ResponsesRequest* r) {
  if (!v.is_array()) return Bad("tools: must be a list");
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  for (size_t i = 0; i < v.size(); ++i) {
    const nlohmann::ordered_json& t = v[i];
    const std::string type = StringField(t, "type");
    if (type != "function") {
      // Hosted tools need services this server does not run.
      r->skipped_tools.push_back(type.empty() ? "(untyped)" : type);
      continue;
    }
    if (!t.contains("name") || !t["name"].is_string()) {
      return Bad(absl::StrCat("tools[", i, "].name: must be a string"));
    }
    nlohmann::ordered_json function = {
        {"name", t["name"]},
        {"parameters",
         t.value("parameters", nlohmann::ordered_json::object())}};
    if (t.contains("description") && t["description"].is_string()) {
      function["description"] = t["description"];
    }
    tools.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  r->chat["tools"] = std::move(tools);
  return absl::OkStatus();
}

absl::Status ResponsesToolChoice(const nlohmann::ordered_json& v,
                                 ResponsesRequest* r) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s != "auto" && s != "none" && s != "required") {
      return Bad("tool_choice: must be auto, none, required or a function");
    }
    r->chat["tool_choice"] = s;
    return absl::OkStatus();
  }
  if (StringField(v, "type") == "function" && v.contains("name")) {
    r->chat["tool_choice"] = {{"type", "function"},
                              {"function", {{"name", v["name"]}}}};
    return absl::OkStatus();
  }
  return Bad(absl::StrCat("tool_choice: ", v.dump(),
                          " is not supported (auto, none, required or "
                          "{\"type\": \"function\", \"name\": ...})"));
}

absl::Status TextFormat(const nlohmann::ordered_json& v, ResponsesRequest* r) {
  if (!v.is_object()) return Bad("text: must be an object");
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it.key() == "verbosity") continue;  // a hint to the model
    if (it.key() != "format") {
      return Bad(absl::StrCat("text.", it.key(), ": not supported"));
    }
    const nlohmann::ordered_json& f = it.value();
    const std::string type = StringField(f, "type");
    if (type == "text") continue;
    if (type == "json_object") {
      r->chat["response_format"] = {{"type", "json_object"}};
    } else if (type == "json_schema" && f.contains("schema")) {
      nlohmann::ordered_json schema = {
          {"name", f.value("name", nlohmann::ordered_json("output"))},
          {"schema", f["schema"]}};
      if (f.contains("strict")) schema["strict"] = f["strict"];
      r->chat["response_format"] = {{"type", "json_schema"},
                                    {"json_schema", std::move(schema)}};
    } else {
      return Bad(
          "text.format: must be text, json_object or json_schema with "
          "a schema");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ResponsesRequest> ResponsesToChat(absl::string_view body) {
  FLOTILLA_ASSIGN_OR_RETURN(
      nlohmann::ordered_json j,
      model::internal::ParseOrderedJson(body, "the request body"));
  if (!j.is_object()) return Bad("the request body must be a JSON object");
  ResponsesRequest r;
  InputConversation c;
  if (j.contains("instructions") && !j["instructions"].is_null()) {
    if (!j["instructions"].is_string()) {
      return Bad("instructions: must be a string");
    }
    c.System(j["instructions"].get<std::string>());
    r.echo["instructions"] = j["instructions"];
  }
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::ordered_json& v = it.value();
    if (v.is_null() || key == "instructions") continue;
    if (key == "input") {
      if (v.is_string()) {
        c.messages.push_back({{"role", "user"}, {"content", v}});
      } else if (v.is_array()) {
        for (size_t i = 0; i < v.size(); ++i) {
          FLOTILLA_RETURN_IF_ERROR(InputItem(v[i], i, &c));
        }
      } else {
        return Bad("input: must be a string or a list of items");
      }
    } else if (key == "model" || key == "temperature" || key == "top_p" ||
               key == "stream" || key == "parallel_tool_calls" ||
               key == "seed") {
      r.chat[key] = v;
    } else if (key == "max_output_tokens") {
      r.chat["max_tokens"] = v;
    } else if (key == "tools") {
      FLOTILLA_RETURN_IF_ERROR(FunctionTools(v, &r));
    } else if (key == "tool_choice") {
      FLOTILLA_RETURN_IF_ERROR(ResponsesToolChoice(v, &r));
    } else if (key == "text") {
      FLOTILLA_RETURN_IF_ERROR(TextFormat(v, &r));
    } else if (key == "reasoning") {
      if (!v.is_object()) return Bad("reasoning: must be an object");
      if (v.contains("effort") && v["effort"].is_string()) {
        kwargs["reasoning_effort"] = v["effort"];
      }
    } else if (key == "previous_response_id" || key == "conversation") {
      return Bad(absl::StrCat(key,
                              ": this server keeps no responses "
                              "(store is off); send the whole conversation "
                              "in input"));
    } else if (key == "background") {
      if (!(v.is_boolean() && !v.get<bool>())) {
        return Bad("background: not supported (responses are not stored)");
      }
    } else if (key == "truncation") {
      if (v != "disabled") {
        return Bad(
            "truncation: only \"disabled\" (a prompt past the context "
            "is refused, not cut)");
      }
    } else if (key == "top_logprobs") {
      if (!(v.is_number_integer() && v.get<int64_t>() == 0)) {
        return Bad("top_logprobs: not supported on /v1/responses");
      }
    } else if (key == "store" || key == "include" ||
               key == "prompt_cache_key" || key == "prompt_cache_retention" ||
               key == "client_metadata" || key == "metadata" || key == "user" ||
               key == "safety_identifier" || key == "service_tier" ||
               key == "stream_options") {
      // Bookkeeping: nothing generated depends on it.
    } else {
      return Bad(absl::StrCat(key, ": not supported"));
    }
    if (key != "input") r.echo[key] = v;
  }
  if (c.messages.empty()) return Bad("input: required (no user message)");
  if (c.has_system) {
    c.messages.insert(
        c.messages.begin(),
        nlohmann::ordered_json{{"role", "system"}, {"content", c.system}});
  }
  r.chat["messages"] = std::move(c.messages);
  if (!kwargs.empty()) r.chat["chat_template_kwargs"] = std::move(kwargs);
  return r;
}

}  // namespace flotilla::coordinator::serve
