// The tool-call syntaxes that open with a marker and run to the end of the
// reply, each as its marker and its parser: Hermes (<tool_call>{json}
// </tool_call> blocks), DeepSeek-V3 / R1 (<｜tool▁calls▁begin｜> sections of
// <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME + a ```json block, or
// V3.1's NAME<｜tool▁sep｜>ARGS) and Kimi K2 (<|tool_calls_section_begin|>
// with <|tool_call_begin|>functions.NAME:N<|tool_call_argument_begin|>ARGS
// <|tool_call_end|>; the "functions.NAME:N" is the call's id, as Kimi's
// template writes it back).
#ifndef FLOTILLA_COORDINATOR_SERVE_TOOL_CALL_SYNTAX_H_
#define FLOTILLA_COORDINATOR_SERVE_TOOL_CALL_SYNTAX_H_

#include <vector>

#include "absl/strings/string_view.h"
#include "coordinator/serve/chat_format.h"
#include "coordinator/serve/completion_request.h"

namespace flotilla::coordinator::serve {

struct SectionSyntax {
  absl::string_view open;  // what begins the calls
  // The calls in `text` (which begins with `open`); false when it is not
  // well formed (the reply is then content).
  bool (*parse)(absl::string_view text, std::vector<ToolCall>* calls);
};

// Null for the syntaxes that are not marker-opened (none, llama3_json).
const SectionSyntax* SectionSyntaxOf(ToolSyntax syntax);

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_TOOL_CALL_SYNTAX_H_
