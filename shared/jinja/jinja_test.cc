#include "shared/jinja/template.h"

#include <string>

#include "gtest/gtest.h"

namespace flotilla::jinja {
namespace {

// Renders `source` with `context` (JSON text); the error message on error.
std::string Render(const std::string& source,
                   const std::string& context = "{}",
                   int64_t max_steps = 10'000'000) {
  absl::StatusOr<Template> t = Template::Parse(source);
  if (!t.ok()) return "PARSE: " + std::string(t.status().message());
  RenderOptions options;
  options.now = absl::FromUnixSeconds(1767225600);  // 2026-01-01
  options.zone = absl::UTCTimeZone();
  options.max_steps = max_steps;
  absl::StatusOr<std::string> out = t->Render(
      Value::FromJson(nlohmann::ordered_json::parse(context)), options);
  if (!out.ok()) return "ERROR: " + std::string(out.status().message());
  return *out;
}

TEST(JinjaTest, PrintsValuesAsPythonDoes) {
  EXPECT_EQ(Render("{{ [1, 'a', none, true, 1.5, {'k': (1, 2)}] }}"),
            "[1, 'a', None, True, 1.5, {'k': (1, 2)}]");
  EXPECT_EQ(Render("{{ 1/2 }} {{ 4/2 }} {{ 7//2 }} {{ -7//2 }} {{ -7 % 3 }}"),
            "0.5 2.0 3 -4 2");
  EXPECT_EQ(Render("{{ x }}|{{ y }}", R"({"x": null})"), "None|");
  EXPECT_EQ(Render("{{ \"it's\" }} {{ ['it\\'s'] }}"), "it's [\"it's\"]");
}

TEST(JinjaTest, WhitespaceControlMatchesTransformers) {
  // trim_blocks drops the newline after a block tag; lstrip_blocks the
  // indentation before one; '-' strips all whitespace on its side.
  EXPECT_EQ(Render("{% if true %}\n  a\n  {% endif %}\nb"), "  a\nb");
  EXPECT_EQ(Render("x  {%- if true -%}  y  {%- endif %}"), "xy");
  EXPECT_EQ(Render("{{ 'a' }}\n{{ 'b' }}\n"), "a\nb");
  EXPECT_EQ(Render("  {%+ if true %}k{% endif %}"), "  k");
  EXPECT_EQ(Render("{# note #}\nx"), "x");
  EXPECT_EQ(Render("{% raw %}{{ not parsed }}{% endraw %}"), "{{ not parsed }}");
}

TEST(JinjaTest, LoopsScopesAndNamespaces) {
  EXPECT_EQ(Render("{% for i in [1,2] %}[{{ x }}]{% set x = i %}{% endfor %}"
                   "{{ x }}",
                   R"({"x": "outer"})"),
            "[outer][outer]outer");
  EXPECT_EQ(Render("{% set ns = namespace(n=0) %}{% for i in range(4) %}"
                   "{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"),
            "6");
  EXPECT_EQ(Render("{% for k, v in {'b': 1, 'a': 2}.items() %}{{ k }}{{ v }}"
                   "{{ ',' if not loop.last }}{% endfor %}"),
            "b1,a2");
  EXPECT_EQ(Render("{% for x in [1,2,3,4] if x is even %}{{ loop.index }}:{{ x "
                   "}} {% else %}none{% endfor %}"),
            "1:2 2:4 ");
  EXPECT_EQ(Render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(Render("{% for x in range(10) %}{% if x == 3 %}{% break %}{% endif "
                   "%}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% endfor "
                   "%}"),
            "02");
}

TEST(JinjaTest, MacrosSeeTopLevelVariablesAtCallTime) {
  EXPECT_EQ(Render("{% macro m(a, b='d') %}{{ a }}{{ b }}{{ y }}{% endmacro %}"
                   "{% set y = '!' %}{{ m(1) }} {{ m(1, b=2) }}"),
            "1d! 12!");
  EXPECT_EQ(Render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}"
                   "{% endif %}{% endmacro %}{{ f(3) }}"),
            "321");
  EXPECT_EQ(Render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}")
                .rfind("ERROR: ", 0),
            0u);
}

TEST(JinjaTest, FiltersTestsAndMethods) {
  EXPECT_EQ(Render("{{ '  Hi  '|trim }}|{{ 'a,b'.split(',')|join('-') }}|"
                   "{{ 'abc'[::-1] }}|{{ [3,1,2]|sort|list }}|{{ 'x'|upper }}"),
            "Hi|a-b|cba|[1, 2, 3]|X");
  EXPECT_EQ(Render("{{ {'b': 1, 'A': 2}|dictsort }}"), "[('A', 2), ('b', 1)]");
  EXPECT_EQ(Render("{{ t|tojson }}|{{ t|tojson(indent=2) }}",
                   R"({"t": {"a": [1, 2.5, "é\n"], "b": {}}})"),
            "{\"a\": [1, 2.5, \"é\\n\"], \"b\": {}}|{\n  \"a\": [\n    1,\n    "
            "2.5,\n    \"é\\n\"\n  ],\n  \"b\": {}\n}");
  EXPECT_EQ(Render("{{ 'é'|tojson(ensure_ascii=true) }}"), "\"\\u00e9\"");
  EXPECT_EQ(Render("{{ xs|selectattr('t', 'equalto', 'f')|map(attribute='n')|"
                   "join(',') }}",
                   R"({"xs": [{"t": "f", "n": 1}, {"t": "g", "n": 2},
                             {"t": "f", "n": 3}]})"),
            "1,3");
  EXPECT_EQ(Render("{{ x is string }}{{ x is not none }}{{ 3 is odd }}"
                   "{{ y is defined }}{{ d is mapping }}{{ 1.0 is integer }}",
                   R"({"x": "s", "d": {}})"),
            "TrueTrueTrueFalseTrueFalse");
  EXPECT_EQ(Render("{{ m.get('a') }}{{ m.get('z', 'dflt') }}{{ m.z }}",
                   R"({"m": {"a": 1}})"),
            "1dflt");
  EXPECT_EQ(Render("{{ strftime_now('%Y-%m-%d') }}"), "2026-01-01");
  EXPECT_EQ(Render("{{ 0.1 + 0.2 }} {{ 1e-5 }} {{ 1e16 }} {{ 3.0 }}"),
            "0.30000000000000004 1e-05 1e+16 3.0");
}

TEST(JinjaTest, ErrorsNameTheProblem) {
  EXPECT_EQ(Render("{{ raise_exception('bad role') }}"), "ERROR: bad role");
  EXPECT_EQ(Render("line\n{{ 'a' + 1 }}"),
            "ERROR: template line 2: unsupported operand type(s) for +: "
            "'string' and 'integer'");
  EXPECT_EQ(Render("{{ x.y }}"), "ERROR: template line 1: 'x' is undefined");
  EXPECT_EQ(Render("{% if x %}"),
            "PARSE: template line 1: missing {% endif %} (at end of template)");
  EXPECT_EQ(Render("{% include 'x' %}"),
            "PARSE: template line 1: unsupported or unexpected statement "
            "'include' (at 'include')");
  EXPECT_EQ(Render("{{ x | nosuch }}"),
            "ERROR: template line 1: no filter named 'nosuch'");
  EXPECT_EQ(Render("{{ 'abc"), "PARSE: template line 1: unterminated string");
}

TEST(JinjaTest, HostileTemplatesEndWithAnError) {
  // Nesting, overflow, growth and loops are bounded: each is an error.
  EXPECT_EQ(Render("{{ " + std::string(500, '(') + "1" + std::string(500, ')') +
                   " }}"),
            "PARSE: template line 1: expressions nest deeper than 100 levels "
            "(at '(')");
  EXPECT_EQ(Render("{{ 9223372036854775807 + 1 }}"),
            "ERROR: template line 1: integer overflow in +");
  EXPECT_EQ(Render("{{ 99999999999999999999 }}"),
            "PARSE: template line 1: integer literal too large (at "
            "'99999999999999999999')");
  EXPECT_EQ(Render("{% set ns = namespace(s='ab') %}{% for i in range(40) %}"
                   "{% set ns.s = ns.s + ns.s %}{% endfor %}"),
            "ERROR: template line 1: a string or list built by the template is "
            "too large (over 67108864 bytes or 1048576 items)");
  EXPECT_EQ(Render("{% for i in range(1000) %}{% for j in range(1000) %}"
                   "{% endfor %}{% endfor %}",
                   "{}", /*max_steps=*/50000),
            "ERROR: template line 1: the template took more than 50000 steps "
            "(loop iterations, macro calls and items printed, compared or "
            "serialized)");
  EXPECT_EQ(Render("{{ 'x' * 100000000 }}"),
            "ERROR: template line 1: a string or list built by the template is "
            "too large (over 67108864 bytes or 1048576 items)");
}

TEST(JinjaTest, RaisedErrorsAreMarked) {
  absl::StatusOr<Template> t = Template::Parse("{{ raise_exception('no') }}");
  ASSERT_TRUE(t.ok());
  absl::StatusOr<std::string> out = t->Render(Value::MakeDict());
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(IsRaisedError(out.status()));
  t = Template::Parse("{{ 1 // 0 }}");
  ASSERT_TRUE(t.ok());
  out = t->Render(Value::MakeDict());
  ASSERT_FALSE(out.ok());
  EXPECT_FALSE(IsRaisedError(out.status()));
}

}  // namespace
}  // namespace flotilla::jinja
