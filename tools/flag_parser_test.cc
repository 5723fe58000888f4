#include "tools/flag_parser.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flotilla::tools {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Args {
  explicit Args(std::vector<std::string> a) : strings(std::move(a)) {
    for (std::string& s : strings) ptrs.push_back(s.data());
  }
  int argc() const { return static_cast<int>(ptrs.size()); }
  char** argv() { return ptrs.data(); }
  std::vector<std::string> strings;
  std::vector<char*> ptrs;
};

struct Flags {
  std::string out;
  int64_t n = 5;
  uint64_t seed = 0;
  bool force = false;
  bool direct = true;
  FlagParser parser{"usage: x"};
  Flags() {
    parser.String("out", &out, "output");
    parser.Int("max-tokens", &n, "count");
    parser.Uint64("seed", &seed, "seed");
    parser.Bool("force", &force, "force");
    parser.Bool("direct_io", &direct, "direct");
  }
};

TEST(FlagParserTest, AcceptsBothValueFormsAndDashOrUnderscore) {
  Flags f;
  Args a({"synth", "--out", "/tmp/x", "--max_tokens=7", "--seed", "42",
          "--force", "--no-direct-io", "pos"});
  ASSERT_TRUE(f.parser.Parse(a.argc(), a.argv()).ok());
  EXPECT_EQ(f.out, "/tmp/x");
  EXPECT_EQ(f.n, 7);
  EXPECT_EQ(f.seed, 42u);
  EXPECT_TRUE(f.force);
  EXPECT_FALSE(f.direct);
  EXPECT_TRUE(f.parser.IsSet("max_tokens"));
  EXPECT_FALSE(f.parser.help());
  EXPECT_THAT(f.parser.positional(), ElementsAre("pos"));
}

TEST(FlagParserTest, BoolTakesExplicitValuesOnlyAfterEquals) {
  Flags f;
  Args a({"synth", "--force=false", "--direct-io=0", "--", "--out"});
  ASSERT_TRUE(f.parser.Parse(a.argc(), a.argv()).ok());
  EXPECT_FALSE(f.force);
  EXPECT_FALSE(f.direct);
  EXPECT_THAT(f.parser.positional(), ElementsAre("--out"));
  EXPECT_TRUE(f.out.empty());
}

TEST(FlagParserTest, ReportsBadInputByFlagName) {
  auto error = [](std::vector<std::string> args) {
    Flags f;
    Args a(std::move(args));
    return std::string(f.parser.Parse(a.argc(), a.argv()).message());
  };
  EXPECT_THAT(error({"x", "--bogus"}), HasSubstr("unknown flag --bogus"));
  EXPECT_THAT(error({"x", "--out"}), HasSubstr("--out needs a value"));
  EXPECT_THAT(error({"x", "--seed", "-1"}), HasSubstr("--seed"));
  EXPECT_THAT(error({"x", "--max-tokens=7x"}), HasSubstr("--max-tokens"));
  EXPECT_THAT(error({"x", "--force=maybe"}), HasSubstr("--force"));
  EXPECT_THAT(error({"x", "-o"}), HasSubstr("unknown flag '-o'"));
}

TEST(FlagParserTest, HelpAndUsage) {
  Flags f;
  Args a({"x", "--help"});
  ASSERT_TRUE(f.parser.Parse(a.argc(), a.argv()).ok());
  EXPECT_TRUE(f.parser.help());
  const std::string usage = f.parser.Usage();
  EXPECT_THAT(usage, HasSubstr("usage: x"));
  EXPECT_THAT(usage, HasSubstr("--max-tokens N"));
  EXPECT_THAT(usage, HasSubstr("--direct-io"));
}

}  // namespace
}  // namespace flotilla::tools
