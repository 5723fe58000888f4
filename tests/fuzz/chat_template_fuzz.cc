// Chat templates come from model folders: any bytes must parse to a
// template or an error, and any template must render to text or an error
// (bounded output, depth and steps), never crash or hang.
//
// An input that starts with 0xff is a repeated template instead (issue 44:
// the crashes were operator chains thousands of links long, which plain
// mutation never grows): bytes 1-2 are a count N (little endian), and the
// rest is HEAD \0 LINK \0 TAIL, rendered as HEAD + N x LINK + TAIL (at
// most 256 KiB: the chains that crashed were 20-100 KB). The render uses
// the server's evaluation depth and value nesting limits; only its steps
// and output are cut, to keep each run short.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "shared/jinja/template.h"

namespace {

// The template an input stands for (see above).
std::string TemplateOf(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  if (size < 3 || data[0] != 0xff) return input;
  const size_t count = data[1] | (size_t{data[2]} << 8);
  const std::string rest = input.substr(3);
  const size_t a = rest.find('\0');
  const size_t b = a == std::string::npos ? a : rest.find('\0', a + 1);
  if (b == std::string::npos) return input;
  const std::string head = rest.substr(0, a);
  const std::string link = rest.substr(a + 1, b - a - 1);
  const std::string tail = rest.substr(b + 1);
  std::string out = head;
  for (size_t i = 0; i < count && out.size() < (256u << 10); ++i) out += link;
  return out + tail;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace jinja = flotilla::jinja;
  const std::string source = TemplateOf(data, size);
  absl::StatusOr<jinja::Template> t = jinja::Template::Parse(source);
  if (!t.ok()) return 0;
  static const jinja::Value* const kContext = new jinja::Value(
      jinja::Value::FromJson(nlohmann::ordered_json::parse(R"({
        "messages": [{"role": "system", "content": "Be brief."},
                     {"role": "user", "content": "Hi \u00e9"},
                     {"role": "assistant", "content": "",
                      "tool_calls": [{"id": "c1", "type": "function",
                        "function": {"name": "f", "arguments": {"x": 1.5}}}]},
                     {"role": "tool", "tool_call_id": "c1", "content": "ok"}],
        "tools": [{"type": "function", "function": {"name": "f",
                   "parameters": {"type": "object"}}}],
        "add_generation_prompt": true, "bos_token": "<s>",
        "eos_token": "</s>"})")));
  jinja::RenderOptions options;
  options.now = absl::FromUnixSeconds(0);
  options.zone = absl::UTCTimeZone();
  options.max_output_bytes = 64 << 10;
  options.max_steps = 20000;
  (void)t->Render(*kContext, options);
  return 0;
}
