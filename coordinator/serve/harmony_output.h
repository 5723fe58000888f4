// gpt-oss's replies in OpenAI's harmony format, parsed from token ids: the
// structure is special tokens (<|channel|>, <|message|>, <|end|>, ...) that
// decoded text drops, so this reads the ids and decodes only the text
// between them. A reply is one or more messages:
//
//   [<|start|>assistant] [ to=functions.NAME] <|channel|>CHANNEL
//       [ to=functions.NAME] [ <|constrain|>json] <|message|>BODY
//       (<|end|> | <|call|> | <|return|>)
//
// (the prompt ends with "<|start|>assistant", so the first message's header
// begins at once). The "analysis" channel is the reasoning, "final" the
// content; a message addressed to=functions.NAME is a call of NAME whose
// body is its JSON arguments; other "commentary" (a preamble) is content.
// Deltas stream as the ids arrive, as ChatOutput's do.
#ifndef FLOTILLA_COORDINATOR_SERVE_HARMONY_OUTPUT_H_
#define FLOTILLA_COORDINATOR_SERVE_HARMONY_OUTPUT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/serve/chat_output.h"
#include "shared/tokenizer/stream_decoder.h"
#include "shared/tokenizer/tokenizer.h"

namespace flotilla::coordinator::serve {

// The ids of harmony's structural tokens in a vocabulary.
struct HarmonyTokens {
  int32_t start = -1, end = -1, message = -1, channel = -1, constrain = -1,
          call = -1, return_ = -1;
  // NotFound naming the first token the tokenizer lacks.
  static absl::StatusOr<HarmonyTokens> Of(const tokenizer::Tokenizer& t);
};

class HarmonyOutput {
 public:
  // `tokenizer` must outlive the parser. `parse_tools`: a message addressed
  // to a function is a tool call (tools were offered, tool_choice auto);
  // otherwise its body is content.
  HarmonyOutput(const tokenizer::Tokenizer* tokenizer, HarmonyTokens tokens,
                bool parse_tools);

  ChatDelta Feed(const std::vector<int32_t>& ids);
  // The end of the reply (an unclosed message ends with it).
  ChatDelta Finish();

  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return reasoning_; }
  const std::vector<ToolCall>& tool_calls() const { return calls_; }

 private:
  enum class Stage { kHeader, kBody, kBetween };
  void FeedOne(int32_t id, ChatDelta* d);
  void StartBody(ChatDelta* d);
  void Body(const std::string& text, ChatDelta* d);
  void EndMessage(ChatDelta* d);

  const tokenizer::Tokenizer* tokenizer_;
  HarmonyTokens t_;
  bool parse_tools_;
  Stage stage_ = Stage::kHeader;
  std::unique_ptr<tokenizer::StreamDecoder> decoder_;  // of the current part
  std::string header_;  // the current message's header, markers spelled
  enum class Sink { kReasoning, kContent, kCall } sink_ = Sink::kContent;
  bool lead_ = true;  // at a body's start: leading whitespace is dropped
  std::string content_, reasoning_;
  std::vector<ToolCall> calls_;
};

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_HARMONY_OUTPUT_H_
