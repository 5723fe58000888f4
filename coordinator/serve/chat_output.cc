#include "coordinator/serve/chat_output.h"

#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "coordinator/serve/harmony_output.h"
#include "coordinator/serve/tool_call_syntax.h"
#include "coordinator/serve/xtml_output.h"
#include "nlohmann/json.hpp"

namespace flotilla::coordinator::serve {
namespace {

using Json = nlohmann::ordered_json;

constexpr absl::string_view kThinkOpen = "<think>";
constexpr absl::string_view kThinkClose = "</think>";

// How many bytes at the end of `text` could begin `tag`.
size_t TagPrefixAtEnd(absl::string_view text, absl::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (absl::EndsWith(text, tag.substr(0, n))) return n;
  }
  return 0;
}

// {"name": ..., "arguments"/"parameters": {...}} as a call; false if not.
bool CallFromJson(const Json& j, ToolCall* call) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) {
    return false;
  }
  const Json args = j.contains("arguments")    ? j["arguments"]
                    : j.contains("parameters") ? j["parameters"]
                                               : Json::object();
  call->id = NewToolCallId();
  call->name = j["name"].get<std::string>();
  call->arguments = args.is_string() ? args.get<std::string>() : args.dump();
  return true;
}

}  // namespace

std::string NewToolCallId() {
  static const char kAlphabet[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[rng() % (sizeof(kAlphabet) - 1)];
  return id;
}

ChatOutput::ChatOutput(ChatOutputOptions options)
    : options_(std::move(options)),
      stage_(options_.think_tags
                 ? (options_.starts_in_reasoning ? Stage::kReasoning
                                                 : Stage::kStart)
                 : Stage::kContent) {
  if (options_.forced == ToolChoice::kNamed) {
    calls_.push_back({NewToolCallId(), options_.forced_name, ""});
  }
  // A forced tool choice is constrained JSON text, not harmony messages.
  if (options_.harmony != nullptr && options_.forced == ToolChoice::kAuto) {
    absl::StatusOr<HarmonyTokens> tokens = HarmonyTokens::Of(*options_.harmony);
    if (tokens.ok()) {
      harmony_ = std::make_unique<HarmonyOutput>(options_.harmony, *tokens,
                                                 options_.parse_tools);
    }
  }
  if (options_.syntax == ToolSyntax::kXtml &&
      options_.forced == ToolChoice::kAuto && !options_.constrained) {
    xtml_ = std::make_unique<XtmlOutput>(options_.xtml_channel,
                                         options_.parse_tools);
  }
}

ChatOutput::~ChatOutput() = default;

const std::string& ChatOutput::content() const {
  if (xtml_ != nullptr) return xtml_->content();
  return harmony_ != nullptr ? harmony_->content() : content_;
}
const std::string& ChatOutput::reasoning() const {
  if (xtml_ != nullptr) return xtml_->reasoning();
  return harmony_ != nullptr ? harmony_->reasoning() : reasoning_;
}
const std::vector<ToolCall>& ChatOutput::tool_calls() const {
  if (xtml_ != nullptr) return xtml_->tool_calls();
  return harmony_ != nullptr ? harmony_->tool_calls() : calls_;
}

ChatDelta ChatOutput::Feed(absl::string_view text,
                           const std::vector<int32_t>& ids) {
  if (harmony_ != nullptr) return harmony_->Feed(ids);
  return Feed(text);
}

ChatDelta ChatOutput::Feed(absl::string_view text) {
  if (xtml_ != nullptr) return xtml_->Feed(text);
  ChatDelta d;
  if (options_.forced == ToolChoice::kNamed) {
    ToolCallDelta delta;
    if (calls_[0].arguments.empty()) {
      delta.id = calls_[0].id;
      delta.name = calls_[0].name;
    }
    absl::StrAppend(&calls_[0].arguments, text);
    delta.arguments = std::string(text);
    if (!text.empty()) d.tool_calls.push_back(std::move(delta));
    return d;
  }
  if (options_.forced == ToolChoice::kRequired) {
    absl::StrAppend(&pending_, text);
    return d;
  }
  absl::StrAppend(&pending_, text);
  if (stage_ == Stage::kStart) {
    const absl::string_view lead = absl::StripLeadingAsciiWhitespace(pending_);
    if (absl::StartsWith(lead, kThinkOpen)) {
      pending_ = std::string(lead.substr(kThinkOpen.size()));
      stage_ = Stage::kReasoning;
    } else if (lead.size() < kThinkOpen.size() &&
               absl::StartsWith(kThinkOpen, lead)) {
      return d;  // may still become <think>
    } else {
      stage_ = Stage::kContent;
    }
  }
  if (stage_ == Stage::kReasoning) {
    const size_t end = absl::string_view(pending_).find(kThinkClose);
    if (end == std::string::npos) {
      // Held: what may begin </think>, and trailing whitespace (dropped if
      // the tag follows).
      const size_t tag = TagPrefixAtEnd(pending_, kThinkClose);
      const size_t text_end =
          absl::StripTrailingAsciiWhitespace(
              absl::string_view(pending_).substr(0, pending_.size() - tag))
              .size();
      d.reasoning = pending_.substr(0, text_end);
      pending_.erase(0, d.reasoning.size());
      if (reasoning_.empty()) {  // the tag's own line break is no reasoning
        d.reasoning =
            std::string(absl::StripLeadingAsciiWhitespace(d.reasoning));
      }
      reasoning_ += d.reasoning;
      return d;
    }
    d.reasoning = pending_.substr(0, end);
    if (reasoning_.empty()) {
      d.reasoning = std::string(absl::StripLeadingAsciiWhitespace(d.reasoning));
    }
    d.reasoning = std::string(absl::StripTrailingAsciiWhitespace(d.reasoning));
    reasoning_ += d.reasoning;
    const std::string rest(
        absl::string_view(pending_).substr(end + kThinkClose.size()));
    pending_.clear();
    stage_ = Stage::kContent;
    content_lead_ = true;
    FeedContent(rest, &d);
    return d;
  }
  std::string text_now = std::move(pending_);
  pending_.clear();
  FeedContent(text_now, &d);
  return d;
}

void ChatOutput::FeedContent(absl::string_view text, ChatDelta* d) {
  if (content_lead_) {  // the blank lines after </think> are no content
    text = absl::StripLeadingAsciiWhitespace(text);
    if (text.empty()) return;
    content_lead_ = false;
  }
  // Harmony is parsed from ids; text alone holds no calls.
  if (!options_.parse_tools || options_.syntax == ToolSyntax::kNone ||
      options_.syntax == ToolSyntax::kHarmony) {
    absl::StrAppend(&d->content, text);
    absl::StrAppend(&content_, text);
    return;
  }
  absl::StrAppend(&pending_, text);
  if (held_calls_) return;
  if (options_.syntax == ToolSyntax::kLlama3Json) {
    if (!decided_) {
      absl::string_view lead = absl::StripLeadingAsciiWhitespace(pending_);
      absl::ConsumePrefix(&lead, "<|python_tag|>");
      if (lead.empty() || absl::StartsWith("<|python_tag|>", lead)) return;
      decided_ = true;
      held_calls_ = lead[0] == '{';
      if (held_calls_) return;
    }
    d->content += pending_;
    content_ += pending_;
    pending_.clear();
    return;
  }
  // Content until the syntax's marker begins the calls.
  const absl::string_view marker = SectionSyntaxOf(options_.syntax)->open;
  const size_t open = absl::string_view(pending_).find(marker);
  const size_t emit = open != std::string::npos
                          ? open
                          : pending_.size() - TagPrefixAtEnd(pending_, marker);
  d->content += pending_.substr(0, emit);
  content_ += pending_.substr(0, emit);
  pending_.erase(0, emit);
  held_calls_ = open != std::string::npos;
}

bool ChatOutput::ParseCalls(const std::string& text) {
  std::vector<ToolCall> calls;
  if (options_.syntax == ToolSyntax::kLlama3Json ||
      options_.forced == ToolChoice::kRequired) {
    absl::string_view body = absl::StripAsciiWhitespace(text);
    absl::ConsumePrefix(&body, "<|python_tag|>");
    const Json parsed = Json::parse(body, nullptr, false);
    // One call, or (tool_choice "required" with parallel_tool_calls) an
    // array of them.
    const Json list = parsed.is_array() ? parsed : Json::array({parsed});
    for (const Json& item : list) {
      ToolCall call;
      if (!CallFromJson(item, &call)) return false;
      calls.push_back(std::move(call));
    }
    if (calls.empty()) return false;
  } else {
    const SectionSyntax* section = SectionSyntaxOf(options_.syntax);
    if (section == nullptr ||
        !section->parse(absl::StripLeadingAsciiWhitespace(text), &calls)) {
      return false;
    }
  }
  calls_ = std::move(calls);
  return !calls_.empty();
}

ChatDelta ChatOutput::Finish() {
  if (harmony_ != nullptr) return harmony_->Finish();
  if (xtml_ != nullptr) return xtml_->Finish();
  ChatDelta d;
  if (options_.forced == ToolChoice::kNamed) return d;
  if (stage_ == Stage::kStart) stage_ = Stage::kContent;
  if (stage_ == Stage::kReasoning) {  // never closed: all of it was thinking
    d.reasoning = pending_;
    reasoning_ += pending_;
    pending_.clear();
    return d;
  }
  const bool calls =
      (held_calls_ || options_.forced == ToolChoice::kRequired) &&
      ParseCalls(pending_);
  if (!calls) {
    d.content = pending_;
    content_ += pending_;
  } else {
    for (size_t i = 0; i < calls_.size(); ++i) {
      d.tool_calls.push_back({static_cast<int>(i), calls_[i].id, calls_[i].name,
                              calls_[i].arguments});
    }
  }
  pending_.clear();
  return d;
}

}  // namespace flotilla::coordinator::serve
