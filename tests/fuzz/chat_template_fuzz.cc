// Chat templates come from model folders: any bytes must parse to a
// template or an error, and any template must render to text or an error
// (bounded output, depth and steps), never crash or hang.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "shared/jinja/template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace jinja = flotilla::jinja;
  const absl::string_view source(reinterpret_cast<const char*>(data), size);
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
  options.max_output_bytes = 1 << 20;
  options.max_depth = 64;
  options.max_steps = 100000;
  (void)t->Render(*kContext, options);
  return 0;
}
