// A Jinja template as Hugging Face chat templates are written and as
// transformers renders them (jinja2's ImmutableSandboxedEnvironment with
// trim_blocks, lstrip_blocks and loop controls; tojson, raise_exception and
// strftime_now as transformers defines them). What it covers is listed in
// parser.h and builtins.h; the golden test renders published chat templates
// and compares with python3-jinja2's output byte for byte.
//
//   absl::StatusOr<Template> t = Template::Parse(source);
//   absl::StatusOr<std::string> prompt = t->Render(context);  // a dict
#ifndef FLOTILLA_SHARED_JINJA_TEMPLATE_H_
#define FLOTILLA_SHARED_JINJA_TEMPLATE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "shared/jinja/ast.h"
#include "shared/jinja/value.h"

namespace flotilla::jinja {

struct RenderOptions {
  // What strftime_now() formats; the clock at render time when infinite.
  absl::Time now = absl::InfinitePast();
  absl::TimeZone zone = absl::LocalTimeZone();
  // Refuses output past this many bytes, macro calls nested deeper than
  // max_depth, expressions evaluated deeper than max_eval_depth (counted
  // across macro calls, so that no render exhausts the stack), values
  // nested deeper than max_value_nesting, and more than max_steps steps, so
  // a runaway template ends with a ResourceExhausted error naming the limit.
  size_t max_output_bytes = 64u << 20;
  int max_depth = 200;
  int max_eval_depth = 500;
  int max_value_nesting = 512;
  // Steps in one render at most: loop iterations, macro calls, and every
  // item that printing, comparing or serializing a value visits (a value
  // that holds another twice is visited twice: budget.h).
  int64_t max_steps = 10'000'000;
};

class Template {
 public:
  // InvalidArgument naming the line for a syntax error or a construct this
  // interpreter does not run.
  static absl::StatusOr<Template> Parse(absl::string_view source);

  // Renders with `context`'s entries as variables (a dict; null = none).
  // An error names the line; a raise_exception() call's error carries its
  // message unchanged and IsRaisedError() says so.
  absl::StatusOr<std::string> Render(
      const Value& context, const RenderOptions& options = {}) const;

 private:
  std::shared_ptr<const Body> body_;
};

// True for the error of a template's own raise_exception("message").
bool IsRaisedError(const absl::Status& status);

}  // namespace flotilla::jinja

#endif  // FLOTILLA_SHARED_JINJA_TEMPLATE_H_
