// Hostile templates from the second fuzz round (issue 44 items 1 and 2):
// operator chains deep enough to exhaust the stack, values that share
// themselves until printing them never ends, and strings multiplied by
// replace(). Each must end with an error naming the limit, never a crash,
// an abort or a render that does not end.
#include <string>

#include "gtest/gtest.h"
#include "shared/jinja/template.h"

namespace flotilla::jinja {
namespace {

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// "PARSE: ...", "ERROR: ..." or the output.
std::string Render(const std::string& source, int64_t max_steps = 10'000'000) {
  absl::StatusOr<Template> t = Template::Parse(source);
  if (!t.ok()) return "PARSE: " + std::string(t.status().message());
  RenderOptions options;
  options.max_steps = max_steps;
  absl::StatusOr<std::string> out = t->Render(Value::MakeDict(), options);
  if (!out.ok()) return "ERROR: " + std::string(out.status().message());
  return *out;
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

constexpr char kTooDeep[] =
    "PARSE: template line 1: expression deeper than 200";

TEST(JinjaLimitsTest, OperatorChainsAreRefusedAtParseTime) {
  // Each of these crashed with SIGSEGV at the first render (or at parse).
  const std::pair<std::string, std::string> chains[] = {
      {"{{ 1", " + 1"}, {"{{ 1", " ~ 1"},      {"{{ 1", " and 1"},
      {"{{ 1", " * 1"}, {"{{ 'a'", "|string"}, {"{{ x", "[0]"},
      {"{{ x", ".y"},   {"{{ f", "()"},        {"{{ 1", " == 1"},
  };
  for (const auto& [head, link] : chains) {
    SCOPED_TRACE(head + link);
    // One link parses (f and x are undefined: a render error, not PARSE).
    EXPECT_FALSE(StartsWith(Render(head + link + " }}"), "PARSE: "));
    for (int n : {300, 20000}) {
      const std::string out = Render(head + Repeat(link, n) + " }}");
      if (link == " == 1") {
        // A comparison chain is one flat node: it runs, with no recursion.
        EXPECT_EQ(out, "True");
      } else {
        EXPECT_TRUE(StartsWith(out, kTooDeep)) << out.substr(0, 200);
      }
    }
  }
  EXPECT_TRUE(StartsWith(Render("{{ " + Repeat("not ", 100000) + "1 }}"),
                         "PARSE: template line 1: 'not' operators nest deeper "
                         "than 100 levels"));
  EXPECT_TRUE(StartsWith(
      Render("{{ " + Repeat("1 if true else ", 50000) + "1 }}"),
      "PARSE: template line 1: expressions nest deeper than 100 levels"));
  // A comparison chain is one node however long: parsed in linear time
  // (chat_template_fuzz timed out on a 34,595-link one).
  EXPECT_EQ(Render("{{ 0" + Repeat(" >= 0", 100000) + " }}"), "True");
  // Below the limits everything still renders.
  EXPECT_EQ(Render("{{ 1" + Repeat(" + 1", 150) + " }}"), "151");
  EXPECT_EQ(Render("{{ " + Repeat("not ", 60) + "true }}"), "True");
}

TEST(JinjaLimitsTest, EvaluationDepthIsBoundedAcrossMacroCalls) {
  // Each call nests an expression 150 deep inside the next call: 200 macro
  // levels would be 30,000 evaluation frames.
  const std::string deep = "n" + Repeat(" + 0", 150);
  const std::string out =
      Render("{% macro f(n) %}{{ f(" + deep +
             " - 1) if n > 0 }}{% endmacro %}" + "{{ f(199) }}");
  EXPECT_TRUE(StartsWith(out, "ERROR: ")) << out;
  EXPECT_NE(out.find("expressions evaluated deeper than 500 levels"),
            std::string::npos)
      << out;
}

constexpr char kDoubling[] =
    "{% set ns = namespace(a=[1]) %}{% for i in range(64) %}"
    "{% set ns.a = [ns.a, ns.a] %}{% endfor %}";

TEST(JinjaLimitsTest, ValuesThatShareThemselvesRunOutOfSteps) {
  // 2^64 items when printed: each use walks the shared lists and runs out
  // of steps instead of running for ever or exhausting memory.
  for (const std::string use :
       {"{{ ns.a }}", "{{ ns.a|tojson }}", "{{ ns.a|string }}",
        "{{ ns.a == ns.a + [] }}", "{{ [ns.a] == [ns.a + []] }}",
        "{{ ns.a in [ns.a + []] }}", "{{ [ns.a, ns.a + []]|unique|list }}",
        "{{ ns.a ~ 'x' }}", "{{ {'k': ns.a}|tojson }}"}) {
    SCOPED_TRACE(use);
    const std::string out = Render(kDoubling + use, /*max_steps=*/200'000);
    EXPECT_TRUE(StartsWith(out,
                           "ERROR: template line 1: the template took "
                           "more than 200000 steps"))
        << out.substr(0, 200);
  }
  // With the default budget too (10 M steps): it ends, with the error.
  const std::string out = Render(std::string(kDoubling) + "{{ ns.a }}");
  EXPECT_TRUE(StartsWith(out,
                         "ERROR: template line 1: the template took "
                         "more than 10000000 steps"))
      << out.substr(0, 200);
}

TEST(JinjaLimitsTest, ValuesThatContainThemselvesAreRefused) {
  const std::string cycle =
      "{% set a = namespace(x=1) %}{% set b = namespace(x=a) %}"
      "{% set a.x = b %}";
  for (const std::string use :
       {"{{ a == b }}", "{{ [a] == [b] }}", "{{ a in [b] }}"}) {
    SCOPED_TRACE(use);
    const std::string out = Render(cycle + use);
    EXPECT_TRUE(StartsWith(out, "ERROR: ")) << out.substr(0, 200);
    EXPECT_NE(out.find("nests deeper than 512 levels (or contains itself)"),
              std::string::npos)
        << out.substr(0, 200);
  }
}

TEST(JinjaLimitsTest, StringsThatWouldPassTheCapAreRefusedBeforeBuilding) {
  const std::string too_large =
      "ERROR: template line 1: a string or list built by the template is too "
      "large";
  EXPECT_TRUE(StartsWith(
      Render("{{ ('a' * 1000000)|replace('a', 'a' * 1000000) }}"), too_large));
  EXPECT_TRUE(StartsWith(
      Render("{{ ('a' * 1000000).replace('a', 'a' * 1000) }}"), too_large));
  EXPECT_TRUE(StartsWith(Render("{{ ('\\n' * 1000000)|indent('x' * 1000) }}"),
                         too_large));
  EXPECT_TRUE(StartsWith(
      Render("{{ (['a' * 1000000] * 100)|join('b' * 1000000) }}"), too_large));
  // Within the cap: the usual results.
  EXPECT_EQ(
      Render("{{ 'abc'|replace('b', 'xx') }}|{{ 'aaa'.replace('a', 'b', 2) "
             "}}|{{ ''.replace('', 'z') }}|{{ 'ab'.replace('', '-') }}"),
      "axxc|bba|z|-a-b-");
}

TEST(JinjaLimitsTest, WalkingAHugeStringCharacterByCharacterIsCharged) {
  // 60 M one-character values would be gigabytes: the steps run out first.
  const std::string out =
      Render("{% for c in 'a' * 60000000 %}{% endfor %}done");
  EXPECT_TRUE(StartsWith(out,
                         "ERROR: template line 1: the template took "
                         "more than 10000000 steps"))
      << out.substr(0, 200);
  // Rebuilding a growing string every turn is charged by its bytes.
  const std::string grow = Render(
      "{% set ns = namespace(s='') %}{% for i in range(100000) %}"
      "{% set ns.s = ns.s ~ ('x' * 600) %}{% endfor %}");
  EXPECT_TRUE(StartsWith(grow, "ERROR: ")) << grow.substr(0, 200);
}

}  // namespace
}  // namespace flotilla::jinja
