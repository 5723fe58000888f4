// build/bin/flotilla-tool as a user runs it: dispatch, --help, exit codes,
// and synth's refusals (non-empty --out, k3-full without --force).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/model/safetensors.h"

namespace flotilla::tools {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct RunResult {
  int code = -1;  // -1: killed by a signal
  std::string out, err;
};

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class ToolCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = fs::temp_directory_path() /
           ("flotilla_tool_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(tmp_);
    fs::create_directories(tmp_);
  }
  void TearDown() override { fs::remove_all(tmp_); }

  RunResult Run(const std::string& args) {
    const std::string out = (tmp_ / "stdout").string();
    const std::string err = (tmp_ / "stderr").string();
    const std::string cmd = std::string(FLOTILLA_BIN_DIR) + "/flotilla-tool " +
                            args + " >" + out + " 2>" + err + " </dev/null";
    const int status = std::system(cmd.c_str());
    RunResult r;
    if (WIFEXITED(status) && WEXITSTATUS(status) < 128) {
      r.code = WEXITSTATUS(status);
    }
    r.out = Slurp(out);
    r.err = Slurp(err);
    return r;
  }

  fs::path tmp_;
};

TEST_F(ToolCliTest, HelpListsSubcommands) {
  RunResult r = Run("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("synth"));
  r = Run("synth --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("--preset"));
  EXPECT_THAT(r.out, HasSubstr("--config-only"));
  EXPECT_EQ(Run("").code, 2);
}

TEST_F(ToolCliTest, UsageErrorsExitTwo) {
  RunResult r = Run("frobnicate");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown command 'frobnicate'"));
  EXPECT_EQ(Run("synth --preset k3-tiny").code, 2);  // no --out
  r = Run("synth --preset k3-nope --out " + (tmp_ / "x").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("k3-bench"));
  r = Run("synth --preset k3-tiny --out x --bogus");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--bogus"));
  EXPECT_EQ(Run("synth --preset k3-tiny --out x --shards zero").code, 2);
}

TEST_F(ToolCliTest, WritesTinyAndRefusesToOverwriteWithoutForce) {
  const std::string out = (tmp_ / "ckpt").string();
  RunResult r = Run("synth --preset k3-tiny --out " + out + " --seed 3");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("14 shards"));
  EXPECT_TRUE(model::SafetensorsCheckpoint::OpenDir(out).ok());
  const std::string first =
      Slurp(fs::path(out) / "model-00002-of-00014.safetensors");

  r = Run("synth --preset k3-tiny --out " + out + " --seed 4");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("not empty"));
  EXPECT_THAT(r.err, HasSubstr("--force"));

  // --force replaces the previous shards (none left over with --shards 2).
  r = Run("synth --preset k3-tiny --out " + out +
          " --seed 3 --force --shards 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(fs::exists(fs::path(out) / "model-00002-of-00014.safetensors"));
  EXPECT_TRUE(fs::exists(fs::path(out) / "model-00002-of-00002.safetensors"));
  EXPECT_FALSE(first.empty());
}

TEST_F(ToolCliTest, FullPresetNeedsForceButWritesItsConfig) {
  const std::string out = (tmp_ / "full").string();
  RunResult r = Run("synth --preset k3-full --out " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--force"));
  EXPECT_THAT(r.err, HasSubstr("bytes"));
  EXPECT_FALSE(fs::exists(out));

  r = Run("synth --preset k3-full --config-only --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  auto c = model::LoadK3Config(out + "/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_hidden_layers, 93);
  EXPECT_EQ(c->num_experts, 896);
  EXPECT_EQ(c->full_attn_layers.size(), 24u);
  EXPECT_EQ(c->full_attn_layers.back(), 93);
}

TEST_F(ToolCliTest, TakesAnyConfigFile) {
  // ckpt_A's flat config: same dimensions as k3-tiny.
  const std::string cfg =
      std::string(FLOTILLA_TEST_DATA_DIR) + "/k3/ckpt_A/config.json";
  RunResult r = Run("synth --config " + cfg + " --dry-run");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("model-00014-of-00014.safetensors"));
  const std::string out = (tmp_ / "fromconfig").string();
  r = Run("synth --config " + cfg + " --out " + out + " --shards=1");
  ASSERT_EQ(r.code, 0) << r.err;
  auto c = model::LoadK3Config(out + "/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hidden_size, 128);
  // A config that is not a K3 config fails with the parser's message.
  std::ofstream(tmp_ / "bad.json") << "{\"hidden_size\": 5}";
  r = Run("synth --config " + (tmp_ / "bad.json").string() + " --out " +
          (tmp_ / "bad").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("num_hidden_layers"));
}

}  // namespace
}  // namespace flotilla::tools
