#include "coordinator/serve/harmony_output.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace flotilla::coordinator::serve {
namespace {

constexpr absl::string_view kChannelMark = "<|channel|>";

// The word after `mark` in `header`, up to whitespace or the next marker.
std::string WordAfter(absl::string_view header, absl::string_view mark) {
  const size_t at = header.find(mark);
  if (at == absl::string_view::npos) return "";
  absl::string_view rest =
      absl::StripLeadingAsciiWhitespace(header.substr(at + mark.size()));
  size_t n = 0;
  while (n < rest.size() && !absl::ascii_isspace(rest[n]) && rest[n] != '<') {
    ++n;
  }
  return std::string(rest.substr(0, n));
}

}  // namespace

absl::StatusOr<HarmonyTokens> HarmonyTokens::Of(const tokenizer::Tokenizer& t) {
  HarmonyTokens h;
  const std::pair<const char*, int32_t*> wanted[] = {
      {"<|start|>", &h.start},         {"<|end|>", &h.end},
      {"<|message|>", &h.message},     {"<|channel|>", &h.channel},
      {"<|constrain|>", &h.constrain}, {"<|call|>", &h.call},
      {"<|return|>", &h.return_}};
  for (const auto& [text, id] : wanted) {
    *id = t.AddedTokenId(text);
    if (*id < 0) {
      return absl::NotFoundError(absl::StrCat(
          "the tokenizer has no ", text,
          " token, which harmony-format replies (gpt-oss) are made of"));
    }
  }
  return h;
}

HarmonyOutput::HarmonyOutput(const tokenizer::Tokenizer* tokenizer,
                             HarmonyTokens tokens, bool parse_tools)
    : tokenizer_(tokenizer),
      t_(tokens),
      parse_tools_(parse_tools),
      decoder_(std::make_unique<tokenizer::StreamDecoder>(tokenizer)) {}

ChatDelta HarmonyOutput::Feed(const std::vector<int32_t>& ids) {
  ChatDelta d;
  for (int32_t id : ids) FeedOne(id, &d);
  return d;
}

void HarmonyOutput::FeedOne(int32_t id, ChatDelta* d) {
  auto flush = [&]() -> std::string {
    absl::StatusOr<std::string> rest = decoder_->Finish();
    decoder_ = std::make_unique<tokenizer::StreamDecoder>(tokenizer_);
    return rest.ok() ? *std::move(rest) : std::string();
  };
  if (id == t_.start) {
    if (stage_ == Stage::kBody) EndMessage(d);
    flush();
    stage_ = Stage::kHeader;
    header_.clear();
  } else if (id == t_.channel || id == t_.constrain) {
    if (stage_ == Stage::kHeader) {
      header_ += flush();
      absl::StrAppend(&header_,
                      id == t_.channel ? kChannelMark : "<|constrain|>");
    }
  } else if (id == t_.message) {
    if (stage_ == Stage::kHeader) {
      header_ += flush();
      StartBody(d);
    }
  } else if (id == t_.end || id == t_.call || id == t_.return_) {
    if (stage_ == Stage::kBody) EndMessage(d);
    stage_ = Stage::kBetween;
  } else {
    absl::StatusOr<std::string> text = decoder_->Next(id);
    if (!text.ok()) return;
    if (stage_ == Stage::kHeader) {
      header_ += *text;
    } else if (stage_ == Stage::kBody) {
      Body(*text, d);
    } else {
      // Text outside any message (a model that drops the markers): content.
      sink_ = Sink::kContent;
      Body(*text, d);
    }
  }
}

void HarmonyOutput::StartBody(ChatDelta* d) {
  stage_ = Stage::kBody;
  lead_ = true;
  const std::string channel = WordAfter(header_, kChannelMark);
  std::string recipient = WordAfter(header_, "to=");
  if (!recipient.empty() && parse_tools_) {
    if (absl::StartsWith(recipient, "functions.")) {
      recipient.erase(0, sizeof("functions.") - 1);
    }
    sink_ = Sink::kCall;
    calls_.push_back({NewToolCallId(), recipient, ""});
    ToolCallDelta c;
    c.index = static_cast<int>(calls_.size()) - 1;
    c.id = calls_.back().id;
    c.name = recipient;
    d->tool_calls.push_back(std::move(c));
    lead_ = false;  // arguments are kept byte for byte
  } else {
    sink_ = channel == "analysis" ? Sink::kReasoning : Sink::kContent;
  }
}

void HarmonyOutput::Body(const std::string& text, ChatDelta* d) {
  absl::string_view piece = text;
  if (lead_) {
    piece = absl::StripLeadingAsciiWhitespace(piece);
    if (piece.empty()) return;
    lead_ = false;
  }
  switch (sink_) {
    case Sink::kReasoning:
      absl::StrAppend(&d->reasoning, piece);
      absl::StrAppend(&reasoning_, piece);
      break;
    case Sink::kContent:
      absl::StrAppend(&d->content, piece);
      absl::StrAppend(&content_, piece);
      break;
    case Sink::kCall: {
      const int index = static_cast<int>(calls_.size()) - 1;
      absl::StrAppend(&calls_.back().arguments, piece);
      if (d->tool_calls.empty() || d->tool_calls.back().index != index) {
        ToolCallDelta c;
        c.index = index;
        d->tool_calls.push_back(std::move(c));
      }
      absl::StrAppend(&d->tool_calls.back().arguments, piece);
      break;
    }
  }
}

void HarmonyOutput::EndMessage(ChatDelta* d) {
  absl::StatusOr<std::string> rest = decoder_->Finish();
  decoder_ = std::make_unique<tokenizer::StreamDecoder>(tokenizer_);
  if (rest.ok() && !rest->empty()) Body(*rest, d);
  stage_ = Stage::kBetween;
}

ChatDelta HarmonyOutput::Finish() {
  ChatDelta d;
  if (stage_ == Stage::kBody) {
    EndMessage(&d);
  } else {
    (void)decoder_->Finish();
  }
  return d;
}

}  // namespace flotilla::coordinator::serve
