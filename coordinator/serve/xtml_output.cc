#include "coordinator/serve/xtml_output.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"

namespace flotilla::coordinator::serve {
namespace {

constexpr absl::string_view kOpen = "<|open|>", kClose = "<|close|>",
                            kSep = "<|sep|>", kEnd = "<|end_of_msg|>";

// The attribute `name` of an open tag's text (tag key="value" ...), with
// the template's escapes (&quot; &amp;) undone; "" when absent.
std::string Attribute(absl::string_view tag, absl::string_view name) {
  const std::string needle = absl::StrCat(" ", name, "=\"");
  const size_t at = tag.find(needle);
  if (at == absl::string_view::npos) return "";
  const size_t from = at + needle.size();
  const size_t to = tag.find('"', from);
  std::string value(tag.substr(from, to == absl::string_view::npos
                                         ? absl::string_view::npos
                                         : to - from));
  for (size_t p = 0; (p = value.find('&', p)) != std::string::npos; ++p) {
    if (value.compare(p, 6, "&quot;") == 0)
      value.replace(p, 6, "\"");
    else if (value.compare(p, 5, "&amp;") == 0)
      value.replace(p, 5, "&");
  }
  return value;
}

// How long a tail of `text` could be the start of a marker (held back).
size_t MarkerPrefix(absl::string_view text) {
  for (size_t keep = std::min<size_t>(text.size(), kEnd.size()); keep > 0;
       --keep) {
    const absl::string_view tail = text.substr(text.size() - keep);
    for (absl::string_view m : {kOpen, kClose, kEnd}) {
      if (absl::StartsWith(m, tail)) return keep;
    }
  }
  return 0;
}

}  // namespace

XtmlOutput::XtmlOutput(std::string first_channel, bool parse_tools)
    : parse_tools_(parse_tools), channel_(std::move(first_channel)) {}

ChatDelta XtmlOutput::Feed(absl::string_view text) {
  ChatDelta d;
  pending_.append(text.data(), text.size());
  while (!ended_ && !pending_.empty()) {
    size_t at = std::string::npos;
    for (absl::string_view m : {kOpen, kClose, kEnd}) {
      at = std::min(at, absl::string_view(pending_).find(m));
    }
    if (at == std::string::npos) {
      const size_t hold = MarkerPrefix(pending_);
      Text(absl::string_view(pending_).substr(0, pending_.size() - hold), &d);
      pending_.erase(0, pending_.size() - hold);
      break;
    }
    Text(absl::string_view(pending_).substr(0, at), &d);
    pending_.erase(0, at);
    if (absl::StartsWith(pending_, kEnd)) {
      pending_.erase(0, kEnd.size());
      Marker(kEnd, &d);
      continue;
    }
    // An open or close marker runs to its <|sep|>.
    const size_t sep = absl::string_view(pending_).find(kSep);
    if (sep == std::string::npos) break;  // wait for the rest
    const std::string marker = pending_.substr(0, sep);
    pending_.erase(0, sep + kSep.size());
    Marker(marker, &d);
  }
  return d;
}

void XtmlOutput::Text(absl::string_view text, ChatDelta* d) {
  if (text.empty()) return;
  if (channel_ == "think") {
    reasoning_.append(text.data(), text.size());
    d->reasoning.append(text.data(), text.size());
  } else if (channel_ == "response" || channel_.empty() ||
             (!parse_tools_ && channel_ == "tools")) {
    content_.append(text.data(), text.size());
    d->content.append(text.data(), text.size());
  } else if (channel_ == "argument") {
    value_.append(text.data(), text.size());
  } else if (channel_ == "json") {
    json_block_.append(text.data(), text.size());
  }
  // Between tags in tools and call: layout only.
}

void XtmlOutput::Marker(absl::string_view marker, ChatDelta* d) {
  if (!parse_tools_ && (channel_ == "tools" || channel_ == "call" ||
                        channel_ == "argument" || channel_ == "json")) {
    // Calls are not parsed: their text is content, markers and all.
    const std::string text =
        marker == kEnd ? std::string(kEnd) : absl::StrCat(marker, kSep);
    content_ += text;
    d->content += text;
    if (absl::StartsWith(marker, kClose) && absl::EndsWith(marker, "tools")) {
      channel_.clear();
    }
    return;
  }
  if (marker == kEnd) {
    ended_ = true;
    return;
  }
  if (absl::ConsumePrefix(&marker, kOpen)) {
    const absl::string_view tag = marker.substr(0, marker.find(' '));
    if (tag == "think" || tag == "response") {
      channel_ = std::string(tag);
    } else if (tag == "tools") {
      channel_ = "tools";
      if (!parse_tools_) {
        content_ += absl::StrCat(kOpen, marker, kSep);
        d->content += absl::StrCat(kOpen, marker, kSep);
      }
    } else if (tag == "call") {
      channel_ = "call";
      calls_.push_back({NewToolCallId(), Attribute(marker, "tool"), ""});
      args_.clear();
      json_block_.clear();
      has_json_block_ = false;
    } else if (tag == "argument") {
      channel_ = "argument";
      key_ = Attribute(marker, "key");
      type_ = Attribute(marker, "type");
      value_.clear();
    } else if (tag == "json") {
      channel_ = "json";
      has_json_block_ = true;
    }
    return;
  }
  if (!absl::ConsumePrefix(&marker, kClose)) return;
  if (marker == "argument") {
    // A string value is the text itself; other types are JSON text (kept
    // as a string when they do not parse, rather than lost).
    nlohmann::json v = type_ == "string"
                           ? nlohmann::json(value_)
                           : nlohmann::json::parse(value_, nullptr, false);
    if (v.is_discarded()) v = value_;
    args_.emplace_back(key_, v.dump());
    channel_ = "call";
  } else if (marker == "json") {
    channel_ = "call";
  } else if (marker == "call" && !calls_.empty()) {
    ToolCall& call = calls_.back();
    if (has_json_block_) {
      call.arguments = std::string(absl::StripAsciiWhitespace(json_block_));
    } else {
      std::string object = "{";
      for (size_t i = 0; i < args_.size(); ++i) {
        absl::StrAppend(&object, i > 0 ? "," : "",
                        nlohmann::json(args_[i].first).dump(), ":",
                        args_[i].second);
      }
      call.arguments = object + "}";
    }
    d->tool_calls.push_back({static_cast<int>(calls_.size()) - 1, call.id,
                             call.name, call.arguments});
    channel_ = "tools";
  } else if (marker == "message") {
    ended_ = true;
  } else {
    channel_.clear();  // think, response or tools closed
  }
}

ChatDelta XtmlOutput::Finish() {
  ChatDelta d;
  // What was held back as a possible marker is text after all.
  if (!ended_ && !pending_.empty()) {
    const std::string rest = std::move(pending_);
    pending_.clear();
    Text(rest, &d);
  }
  return d;
}

}  // namespace flotilla::coordinator::serve
