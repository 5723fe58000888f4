// Kimi K3's replies in its XTML channels, parsed from the decoded text (the
// markers are added tokens that decode to their literal text):
//
//   <|open|>think<|sep|>REASONING<|close|>think<|sep|>
//   <|open|>response<|sep|>CONTENT<|close|>response<|sep|>
//   [<|open|>tools<|sep|>
//      <|open|>call tool="NAME" index="1"<|sep|>
//        (<|open|>argument key="K" type="string|number|..."<|sep|>VALUE
//         <|close|>argument<|sep|>)*  |  <|open|>json type="object"<|sep|>
//        {...}<|close|>json<|sep|>
//      <|close|>call<|sep|> ...
//    <|close|>tools<|sep|>]
//   <|close|>message<|sep|><|end_of_msg|>
//
// as the template writes an assistant turn back (the prompt ends inside
// <|open|>think<|sep|> or <|open|>response<|sep|>). The think channel is
// the reasoning, the response channel the content; each call becomes a
// tool call whose arguments are the JSON object of its arguments (a value
// of type string as a JSON string, others as the JSON text they are) or
// its json block. Deltas stream as the text arrives: reasoning and content
// at once (a tail that may begin a marker held back), a call when it
// closes. Without tools offered, calls are not parsed: their text is
// content.
#ifndef FLOTILLA_COORDINATOR_SERVE_XTML_OUTPUT_H_
#define FLOTILLA_COORDINATOR_SERVE_XTML_OUTPUT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "coordinator/serve/chat_output.h"
#include "coordinator/serve/completion_request.h"

namespace flotilla::coordinator::serve {

class XtmlOutput {
 public:
  // `first_channel`: "think", "response" or "" (the prompt opened none).
  XtmlOutput(std::string first_channel, bool parse_tools);

  ChatDelta Feed(absl::string_view text);
  ChatDelta Finish();

  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return reasoning_; }
  const std::vector<ToolCall>& tool_calls() const { return calls_; }

 private:
  // Handles one complete marker ("<|open|>TAG ATTRS", "<|close|>TAG" or
  // "<|end_of_msg|>"; the <|sep|> taken off).
  void Marker(absl::string_view marker, ChatDelta* d);
  void Text(absl::string_view text, ChatDelta* d);

  bool parse_tools_;
  std::string channel_;  // think, response, tools, call, argument, json, ""
  bool ended_ = false;   // <|end_of_msg|> or the message closed
  std::string pending_;  // not yet read: may begin a marker
  std::string content_, reasoning_;
  std::vector<ToolCall> calls_;
  // The call being read: its arguments as (key, JSON value) pairs, or its
  // json block; the argument being read and its type.
  std::vector<std::pair<std::string, std::string>> args_;
  std::string json_block_, value_, key_, type_;
  bool has_json_block_ = false;
  std::string raw_call_;  // without parse_tools: the call's text as is
};

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_XTML_OUTPUT_H_
