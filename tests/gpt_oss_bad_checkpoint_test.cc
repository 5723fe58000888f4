// gpt-oss checkpoints broken the ways its release can be (a config that
// disagrees with the attention or the fused expert tensors, a lost expert
// bias, an E8M0 scale byte of 255) are refused when the engine opens them
// and by `flotilla-tool pack`, naming the tensor; never run. Each case
// rewrites tests/fixtures/gpt-oss/ckpt_A with one fault.
#include <functional>
#include <string>

#include "coordinator/engine.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/testing/fixture.h"
#include "shared/testing/process.h"
#include "tests/checkpoint_rewrite.h"
#include "tests/distributed_test_util.h"

namespace flotilla {
namespace {

std::string CkptDir() { return testutil::DataPath("gpt-oss/ckpt_A"); }

struct BrokenGptOss {
  const char* what;
  std::function<void(nlohmann::json&)> config;
  std::function<void(const model::TensorInfo&, testutil::TensorFate*)> edit;
  const char* engine_error;  // in OpenEngine's status
  const char* pack_error;    // in `flotilla-tool pack`'s stderr
};

TEST(GptOssReferenceTest, BrokenCheckpointsAreRefusedNamingTheTensor) {
  const std::string bias = "model.layers.2.mlp.experts.down_proj_bias";
  const std::string scales = "model.layers.1.mlp.experts.gate_up_proj_scales";
  const BrokenGptOss cases[] = {
      {"head_dim", [](nlohmann::json& c) { c["head_dim"] = 16; }, nullptr,
       "tensor model.layers.0.self_attn.q_proj.weight in ",
       "tensor model.layers.0.self_attn.q_proj.weight in "},
      {"intermediate_size",
       [](nlohmann::json& c) { c["intermediate_size"] = 64; }, nullptr,
       "tensor model.layers.0.mlp.experts.gate_up_proj_blocks in ",
       "expected U8 [16,128,2,16]"},
      {"a lost bias", nullptr,
       [&](const model::TensorInfo& t, testutil::TensorFate* f) {
         if (t.name == bias) f->shard = -1;
       },
       "missing tensor model.layers.2.mlp.experts.down_proj_bias",
       "missing tensor model.layers.2.mlp.experts.down_proj_bias"},
      {"scale 255", nullptr,
       [&](const model::TensorInfo& t, testutil::TensorFate* f) {
         // Expert 3's first gate/up row: byte 3 * 192 * 2.
         if (t.name == scales) f->bytes[3 * 192 * 2] = 255;
       },
       "scale 0 is 255 (E8M0 NaN)", "layer 1 expert 3"},
  };
  for (const BrokenGptOss& c : cases) {
    nlohmann::json config = testutil::LoadJson(CkptDir() + "/config.json");
    if (c.config) c.config(config);
    testutil::RewriteOptions ro;
    ro.config_json = config.dump();
    if (c.edit) ro.edit = c.edit;
    dtest::TempDir tmp;
    const std::string dir = tmp.path() + "/ckpt";
    ASSERT_TRUE(testutil::RewriteCheckpoint(CkptDir(), dir, ro).ok());
    coordinator::EngineOptions o;
    o.model_dir = dir;
    auto engine = coordinator::OpenEngine(o);
    ASSERT_FALSE(engine.ok()) << c.what;
    EXPECT_NE(engine.status().message().find(c.engine_error), std::string::npos)
        << c.what << ": " << engine.status();
    const testutil::CommandResult r = testutil::RunCommand(
        testutil::BinPath("flotilla-tool") + " pack --model " + dir +
            " --out " + tmp.path() + "/pack",
        tmp.path());
    EXPECT_TRUE(r.exited && r.code != 0) << c.what;
    EXPECT_NE(r.err.find(c.pack_error), std::string::npos)
        << c.what << ": " << r.err;
  }
}

}  // namespace
}  // namespace flotilla
