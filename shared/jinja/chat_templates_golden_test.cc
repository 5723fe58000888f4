// Published chat templates (testdata/templates, sources in testdata/
// README.md) rendered with each conversation of testdata/
// conversations.json must equal python3-jinja2's rendering, recorded in
// testdata/rendered.json by scripts/render_chat_templates.py, byte for
// byte; where jinja2 fails, this interpreter must fail too (with the same
// message for the template's own raise_exception).
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/jinja/template.h"

namespace flotilla::jinja {
namespace {

using Json = nlohmann::ordered_json;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Json ReadJson(const std::string& name) {
  return Json::parse(ReadFile(std::string(FLOTILLA_JINJA_TESTDATA) + "/" + name));
}

TEST(ChatTemplatesGoldenTest, EqualsPythonJinja2OnEveryTemplateAndConversation) {
  const Json templates = ReadJson("templates.json");
  const Json cases = ReadJson("conversations.json");
  const Json rendered = ReadJson("rendered.json");
  std::map<std::string, const Json*> case_by_name;
  for (const Json& c : cases) case_by_name[c["name"]] = &c;

  RenderOptions options;
  options.now = absl::FromUnixSeconds(1767225600);  // 2026-01-01 UTC
  options.zone = absl::UTCTimeZone();

  int outputs = 0, errors = 0;
  std::map<std::string, Template> parsed;
  for (const Json& r : rendered["results"]) {
    const std::string name = r["template"];
    SCOPED_TRACE(name + " / " + std::string(r["case"]));
    if (!parsed.count(name)) {
      absl::StatusOr<Template> t = Template::Parse(ReadFile(
          std::string(FLOTILLA_JINJA_TESTDATA) + "/templates/" + name + ".jinja"));
      ASSERT_TRUE(t.ok()) << t.status();
      parsed.emplace(name, *std::move(t));
    }
    const Json& c = *case_by_name.at(r["case"]);
    const Json& meta = templates[name];
    Json context = {{"messages", c["messages"]},
                    {"tools", c.contains("tools") ? c["tools"] : Json(nullptr)},
                    {"documents", nullptr},
                    {"add_generation_prompt", c["add_generation_prompt"]},
                    {"bos_token", meta["bos_token"]},
                    {"eos_token", meta["eos_token"]}};
    if (c.contains("kwargs")) {
      for (auto it = c["kwargs"].begin(); it != c["kwargs"].end(); ++it) {
        context[it.key()] = it.value();
      }
    }
    absl::StatusOr<std::string> out =
        parsed.at(name).Render(Value::FromJson(context), options);
    if (r.contains("output")) {
      ++outputs;
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(*out, r["output"].get<std::string>());
    } else {
      ++errors;
      ASSERT_FALSE(out.ok()) << "jinja2 failed with: " << r["error"];
      if (r["raised"].get<bool>()) {
        EXPECT_TRUE(IsRaisedError(out.status())) << out.status();
        EXPECT_EQ(out.status().message(), r["error"].get<std::string>());
      }
    }
  }
  // The counts the closing note quotes; a shrunken test set fails here.
  EXPECT_EQ(templates.size(), 10u);
  EXPECT_EQ(cases.size(), 16u);
  EXPECT_EQ(outputs + errors, 160);
  std::printf("%d renders equal python3-jinja2 %s (%d outputs, %d errors)\n",
              outputs + errors, rendered["jinja2_version"].get<std::string>().c_str(),
              outputs, errors);
}

}  // namespace
}  // namespace flotilla::jinja
