#include "coordinator/serve/chat_request.h"

#include "absl/strings/str_cat.h"
#include "coordinator/serve/request_errors.h"
#include "shared/base/status_macros.h"

namespace flotilla::coordinator::serve::internal {
namespace {

using Json = nlohmann::ordered_json;

using internal::Bad;

bool ValidToolName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

// A message's content as OpenAI clients send it: a string, a list of text
// parts (joined), or null on an assistant turn that only called tools.
absl::StatusOr<std::string> Content(const Json& v, const std::string& role,
                                    const std::string& field,
                                    const RequestLimits& limits) {
  if (v.is_null()) {
    if (role == "assistant") return std::string();
    return Bad(absl::StrCat(field, " may be null only on an assistant message"));
  }
  if (!v.is_array()) return Text(v, field, limits);
  std::string joined;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = absl::StrCat(field, "[", i, "]");
    const Json& part = v[i];
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      return Bad(at + " must be an object with a type");
    }
    const std::string type = part["type"].get<std::string>();
    if (type != "text") {
      return Bad(absl::StrCat(at, ".type '", type,
                              "' is not supported (this model reads text "
                              "parts only)"));
    }
    if (!part.contains("text")) return Bad(at + " has no text");
    FLOTILLA_ASSIGN_OR_RETURN(std::string text,
                              Text(part["text"], at + ".text", limits));
    joined += text;
    if (joined.size() > limits.max_prompt_bytes) {
      return Bad(absl::StrCat(field, " is more than ", limits.max_prompt_bytes,
                              " bytes"));
    }
  }
  return joined;
}

absl::Status ParseToolCalls(const Json& v, const std::string& at,
                            const RequestLimits& limits, ChatMessage* msg) {
  if (!v.is_array()) return Bad(at + " must be an array");
  Json view = Json::array();
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string here = absl::StrCat(at, "[", i, "]");
    const Json& c = v[i];
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) {
      return Bad(here + " must be an object with a function");
    }
    if (c.contains("type") && c["type"] != "function") {
      return Bad(here + ".type must be \"function\"");
    }
    ToolCall call;
    if (c.contains("id") && !c["id"].is_null()) {
      FLOTILLA_ASSIGN_OR_RETURN(call.id, Text(c["id"], here + ".id", limits));
    }
    const Json& f = c["function"];
    if (!f.contains("name") || !f["name"].is_string()) {
      return Bad(here + ".function.name must be a string");
    }
    call.name = f["name"].get<std::string>();
    Json arguments = Json::object();
    if (f.contains("arguments") && f["arguments"].is_string()) {
      FLOTILLA_ASSIGN_OR_RETURN(
          call.arguments, Text(f["arguments"], here + ".function.arguments", limits));
      arguments = Json::parse(call.arguments, nullptr, false);
      if (arguments.is_discarded()) arguments = call.arguments;
    } else if (f.contains("arguments") && f["arguments"].is_object()) {
      arguments = f["arguments"];
      call.arguments = arguments.dump();
    } else if (f.contains("arguments") && !f["arguments"].is_null()) {
      return Bad(here + ".function.arguments must be a JSON string");
    }
    Json call_view = c;
    call_view["type"] = "function";
    call_view["function"]["arguments"] = arguments;
    view.push_back(std::move(call_view));
    msg->tool_calls.push_back(std::move(call));
  }
  msg->view["tool_calls"] = std::move(view);
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseMessages(const Json& m, const RequestLimits& limits,
                           CompletionRequest* r) {
  if (!m.is_array() || m.empty()) return Bad("messages must be a non-empty array");
  size_t total = 0;
  for (size_t i = 0; i < m.size(); ++i) {
    const std::string at = absl::StrCat("messages[", i, "]");
    if (!m[i].is_object() || !m[i].contains("role") || !m[i]["role"].is_string()) {
      return Bad(at + " must be an object with a role");
    }
    ChatMessage msg;
    msg.role = m[i]["role"].get<std::string>();
    const bool assistant = msg.role == "assistant", tool = msg.role == "tool";
    if (msg.role != "system" && msg.role != "user" && !assistant && !tool &&
        msg.role != "developer") {
      return Bad(absl::StrCat(at, ".role '", msg.role,
                              "' is not system, developer, user, assistant or "
                              "tool"));
    }
    msg.view = Json::object();
    msg.view["role"] = msg.role;
    for (auto it = m[i].begin(); it != m[i].end(); ++it) {
      const std::string& key = it.key();
      const std::string field = at + "." + key;
      if (key == "role" || key == "content") continue;
      if (key == "name") {
        FLOTILLA_ASSIGN_OR_RETURN(msg.name, Text(it.value(), field, limits));
        msg.view["name"] = msg.name;
      } else if (key == "tool_calls" && assistant) {
        if (it.value().is_null()) continue;
        FLOTILLA_RETURN_IF_ERROR(ParseToolCalls(it.value(), field, limits, &msg));
      } else if (key == "tool_call_id" && tool) {
        FLOTILLA_ASSIGN_OR_RETURN(msg.tool_call_id, Text(it.value(), field, limits));
        msg.view["tool_call_id"] = msg.tool_call_id;
      } else if ((key == "reasoning_content" || key == "reasoning") && assistant) {
        if (it.value().is_null()) continue;
        FLOTILLA_ASSIGN_OR_RETURN(msg.reasoning_content,
                                  Text(it.value(), field, limits));
        msg.view["reasoning_content"] = msg.reasoning_content;
      } else if (key == "refusal" && assistant && it.value().is_null()) {
        continue;
      } else {
        return Bad(field + " is not supported");
      }
    }
    if (!m[i].contains("content") && !(assistant && !msg.tool_calls.empty())) {
      return Bad(at + " has no content");
    }
    if (tool && msg.tool_call_id.empty()) return Bad(at + ".tool_call_id is required");
    FLOTILLA_ASSIGN_OR_RETURN(
        msg.content, Content(m[i].value("content", Json()), msg.role,
                             at + ".content", limits));
    msg.view["content"] = msg.content;
    total += msg.content.size();
    for (const ToolCall& c : msg.tool_calls) total += c.arguments.size();
    if (total > limits.max_prompt_bytes) {
      return Bad(absl::StrCat("messages total more than ",
                              limits.max_prompt_bytes, " bytes"));
    }
    r->messages.push_back(std::move(msg));
  }
  return absl::OkStatus();
}

absl::Status ParseTools(const Json& v, CompletionRequest* r) {
  if (!v.is_array()) return Bad("tools must be an array");
  if (v.size() > 128) return Bad("tools: at most 128");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = absl::StrCat("tools[", i, "]");
    const Json& t = v[i];
    if (!t.is_object() || t.value("type", Json()) != "function" ||
        !t.contains("function") || !t["function"].is_object()) {
      return Bad(at + " must be {\"type\": \"function\", \"function\": {...}}");
    }
    const Json& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string() ||
        !ValidToolName(f["name"].get<std::string>())) {
      return Bad(at + ".function.name must be 1 to 64 letters, digits, _ or -");
    }
    ToolDefinition def;
    def.name = f["name"].get<std::string>();
    for (const ToolDefinition& other : r->tool_definitions) {
      if (other.name == def.name) {
        return Bad(absl::StrCat(at, ".function.name '", def.name,
                                "' is given twice"));
      }
    }
    for (auto it = f.begin(); it != f.end(); ++it) {
      if (it.key() == "parameters") {
        if (!it.value().is_object()) return Bad(at + ".function.parameters must be an object");
        def.parameters = it.value();
      } else if (it.key() == "description" && !it.value().is_string()) {
        return Bad(at + ".function.description must be a string");
      } else if (it.key() != "name" && it.key() != "description" &&
                 it.key() != "strict") {
        return Bad(absl::StrCat(at, ".function.", it.key(), " is not supported"));
      }
    }
    r->tool_definitions.push_back(std::move(def));
  }
  r->tools = v;
  return absl::OkStatus();
}

absl::Status ParseToolChoice(const Json& v, CompletionRequest* r) {
  if (v == "auto") {
    r->tool_choice = ToolChoice::kAuto;
  } else if (v == "none") {
    r->tool_choice = ToolChoice::kNone;
  } else if (v == "required") {
    r->tool_choice = ToolChoice::kRequired;
  } else if (v.is_object() && v.value("type", Json()) == "function" &&
             v.contains("function") && v["function"].is_object() &&
             v["function"].contains("name") && v["function"]["name"].is_string()) {
    r->tool_choice = ToolChoice::kNamed;
    r->tool_choice_name = v["function"]["name"].get<std::string>();
  } else {
    return Bad(
        "tool_choice must be \"auto\", \"none\", \"required\" or "
        "{\"type\": \"function\", \"function\": {\"name\": ...}}");
  }
  return absl::OkStatus();
}

absl::Status ParseResponseFormat(const Json& v, CompletionRequest* r) {
  if (!v.is_object() || !v.contains("type") || !v["type"].is_string()) {
    return Bad("response_format must be an object with a type");
  }
  const std::string type = v["type"].get<std::string>();
  if (type == "text") {
    r->response_format = ResponseFormat::kText;
  } else if (type == "json_object") {
    r->response_format = ResponseFormat::kJsonObject;
  } else if (type == "json_schema") {
    const Json spec = v.value("json_schema", Json());
    if (!spec.is_object() || !spec.contains("schema")) {
      return Bad("response_format.json_schema must be an object with a schema");
    }
    r->response_format = ResponseFormat::kJsonSchema;
    r->response_schema = spec["schema"];
  } else {
    return Bad(absl::StrCat("response_format type '", type,
                            "' is not one of text, json_object, json_schema"));
  }
  return absl::OkStatus();
}

absl::Status ParseTemplateKwargs(const Json& v, CompletionRequest* r) {
  if (!v.is_object()) return Bad("chat_template_kwargs must be an object");
  for (auto it = v.begin(); it != v.end(); ++it) {
    static const char* const kReserved[] = {"messages", "tools", "documents",
                                            "add_generation_prompt",
                                            "bos_token", "eos_token"};
    for (const char* reserved : kReserved) {
      if (it.key() == reserved) {
        return Bad(absl::StrCat("chat_template_kwargs.", it.key(),
                                " is set by the server"));
      }
    }
  }
  // Merged: a top-level reasoning_effort may already be there (the
  // kwargs' own value wins, as it names the template's variable directly).
  for (auto it = v.begin(); it != v.end(); ++it) {
    r->template_kwargs[it.key()] = it.value();
  }
  return absl::OkStatus();
}

absl::Status ResolveOutputConstraint(CompletionRequest* r) {
  using constrained::CompiledSchema;
  const bool forced = r->tool_choice == ToolChoice::kRequired ||
                      r->tool_choice == ToolChoice::kNamed;
  if (forced && r->tool_definitions.empty()) {
    return Bad("tool_choice requires tools");
  }
  if (forced && r->response_format != ResponseFormat::kText) {
    return Bad("response_format and a forced tool_choice cannot be combined");
  }
  absl::StatusOr<CompiledSchema> schema = absl::UnknownError("");
  std::string field;
  if (r->tool_choice == ToolChoice::kNamed) {
    const ToolDefinition* named = nullptr;
    for (const ToolDefinition& d : r->tool_definitions) {
      if (d.name == r->tool_choice_name) named = &d;
    }
    if (named == nullptr) {
      return Bad(absl::StrCat("tool_choice names '", r->tool_choice_name,
                              "', which is not among the tools"));
    }
    field = "the parameters of tool '" + named->name + "'";
    schema = named->parameters.is_null()
                 ? CompiledSchema::AnyObject()
                 : CompiledSchema::Compile(named->parameters,
                                           /*closed_objects=*/true);
  } else if (r->tool_choice == ToolChoice::kRequired) {
    std::vector<std::pair<std::string, Json>> tools;
    for (const ToolDefinition& d : r->tool_definitions) {
      tools.emplace_back(d.name, d.parameters.is_null()
                                     ? Json({{"type", "object"}})
                                     : d.parameters);
    }
    field = "tools";
    schema = CompiledSchema::ToolCall(
        tools, r->parallel_tool_calls ? kMaxParallelCalls : 1);
  } else if (r->response_format == ResponseFormat::kJsonObject) {
    schema = CompiledSchema::AnyObject();
  } else if (r->response_format == ResponseFormat::kJsonSchema) {
    field = "response_format.json_schema.schema";
    schema = CompiledSchema::Compile(r->response_schema);
  } else {
    return absl::OkStatus();
  }
  if (!schema.ok()) {
    return Bad(absl::StrCat(field, ": ", schema.status().message()));
  }
  r->output_schema = std::make_shared<const CompiledSchema>(*std::move(schema));
  return absl::OkStatus();
}

}  // namespace flotilla::coordinator::serve::internal
