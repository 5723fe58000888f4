// DeepSeek-V3 checkpoints that are broken in the ways FP8 releases can be
// (a block scale missing or of the wrong block grid, a NaN code, a config
// that disagrees with the tensors) are refused when the engine opens them
// and by `flotilla-tool pack`, naming the tensor or the config field; never
// run. Each case rewrites tests/fixtures/deepseek-v3/ckpt_A with one fault.
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "coordinator/engine.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/testing/fixture.h"
#include "shared/testing/process.h"
#include "tests/checkpoint_rewrite.h"
#include "tests/distributed_test_util.h"

namespace flotilla {
namespace {

std::string CkptDir() { return testutil::DataPath("deepseek-v3/ckpt_A"); }

struct Fault {
  std::string label;
  testutil::RewriteOptions rewrite;
  std::string engine_error;  // a substring of the engine's error
  std::string pack_error;    // of `flotilla-tool pack`'s; "" = the same
};

// Drops tensor `name`.
testutil::RewriteOptions Drop(const std::string& name) {
  testutil::RewriteOptions o;
  o.edit = [name](const model::TensorInfo& t, testutil::TensorFate* f) {
    if (t.name == name) f->shard = -1;
  };
  return o;
}

// Gives tensor `name` another shape (same element count).
testutil::RewriteOptions Reshape(const std::string& name,
                                 std::vector<int64_t> shape) {
  testutil::RewriteOptions o;
  o.edit = [name, shape](const model::TensorInfo& t, testutil::TensorFate* f) {
    if (t.name == name) f->shape = shape;
  };
  return o;
}

// Sets byte 5 of tensor `name` to `code`.
testutil::RewriteOptions Poke(const std::string& name, uint8_t code) {
  testutil::RewriteOptions o;
  o.edit = [name, code](const model::TensorInfo& t, testutil::TensorFate* f) {
    if (t.name == name) f->bytes[5] = code;
  };
  return o;
}

// The fixture's config.json with one field set (a JSON pointer).
testutil::RewriteOptions ConfigWith(const std::string& pointer,
                                    const nlohmann::json& value) {
  nlohmann::json config = testutil::LoadJson(CkptDir() + "/config.json");
  config[nlohmann::json::json_pointer(pointer)] = value;
  testutil::RewriteOptions o;
  o.config_json = config.dump();
  return o;
}

// Sets every float of F32 tensor `name` to `value`.
testutil::RewriteOptions SetFloat(const std::string& name, float value) {
  testutil::RewriteOptions o;
  o.edit = [name, value](const model::TensorInfo& t, testutil::TensorFate* f) {
    if (t.name != name) return;
    for (size_t i = 0; i + 4 <= f->bytes.size(); i += 4) {
      std::memcpy(&f->bytes[i], &value, 4);
    }
  };
  return o;
}

std::vector<Fault> Faults() {
  const std::string attn = "model.layers.1.self_attn.";
  const std::string expert = "model.layers.2.mlp.experts.3.up_proj.";
  std::vector<Fault> faults;
  faults.push_back(
      {"trunk scale missing",
       Drop(attn + "kv_a_proj_with_mqa.weight_scale_inv"),
       "missing tensor " + attn + "kv_a_proj_with_mqa.weight_scale_inv", ""});
  // q_b_proj is [192,96]: its grid is [2,1].
  faults.push_back({"trunk scale of the wrong block grid",
                    Reshape(attn + "q_b_proj.weight_scale_inv", {1, 2}),
                    attn + "q_b_proj.weight_scale_inv in", ""});
  faults.push_back({"trunk NaN code", Poke(attn + "q_a_proj.weight", 0x7f),
                    "tensor " + attn +
                        "q_a_proj.weight: FP8 weight at row 0, "
                        "column 5 is NaN",
                    ""});
  faults.push_back({"expert scale missing", Drop(expert + "weight_scale_inv"),
                    "missing tensor " + expert + "weight_scale_inv", ""});
  // up_proj is [64,256]: its grid is [1,2].
  faults.push_back({"expert scale of the wrong block grid",
                    Reshape(expert + "weight_scale_inv", {2, 1}),
                    expert + "weight_scale_inv in", ""});
  faults.push_back({"expert NaN code", Poke(expert + "weight", 0xff),
                    "FP8 weight at row 0, column 5 is NaN (code 0xff)", ""});
  // A config that says 8 routed experts for a checkpoint of 16.
  faults.push_back({"config with fewer experts",
                    ConfigWith("/n_routed_experts", 8),
                    "n_routed_experts is 8 but the checkpoint's routed "
                    "experts are 0..15",
                    ""});
  faults.push_back({"group count not dividing the experts",
                    ConfigWith("/n_group", 3),
                    "n_group: 3 does not divide n_routed_experts 16", ""});
  faults.push_back({"topk_group above n_group", ConfigWith("/topk_group", 5),
                    "topk_group: 5 is above n_group 4", ""});
  // Issue 44 item 7. A NaN in a router's correction bias ran and changed
  // which experts were picked.
  const std::string bias = "model.layers.1.mlp.gate.e_score_correction_bias";
  faults.push_back({"router bias NaN", SetFloat(bias, NAN),
                    "tensor " + bias + ": element 0 is nan", ""});
  faults.push_back({"router bias Inf", SetFloat(bias, INFINITY),
                    "tensor " + bias + ": element 0 is inf", ""});
  // The MTP layer (layer 4 here) is never run, but is checked as released.
  const std::string mtp = "model.layers.4.";
  testutil::RewriteOptions mtp_dtype;
  mtp_dtype.edit = [mtp](const model::TensorInfo& t, testutil::TensorFate* f) {
    if (t.name == mtp + "self_attn.q_a_proj.weight")
      f->dtype = model::DType::kU8;
  };
  faults.push_back({"MTP projection of the wrong dtype", mtp_dtype,
                    "MTP layer 4 (num_nextn_predict_layers; never run, "
                    "checked as released): tensor " +
                        mtp + "self_attn.q_a_proj.weight in",
                    ""});
  faults.push_back({"MTP norm of the wrong shape",
                    Reshape(mtp + "enorm.weight", {16, 16}),
                    "MTP layer 4 (num_nextn_predict_layers; never run, "
                    "checked as released): tensor " +
                        mtp + "enorm.weight in",
                    ""});
  const std::string mtp_scale = mtp + "mlp.experts.3.up_proj.weight_scale_inv";
  faults.push_back({"MTP expert scale NaN", SetFloat(mtp_scale, NAN),
                    "tensor " + mtp_scale +
                        ": element 0 is nan (block scales are finite and "
                        "positive)",
                    ""});
  faults.push_back(
      {"MTP expert missing", Drop(mtp + "mlp.experts.3.up_proj.weight"),
       "missing tensor " + mtp + "mlp.experts.3.up_proj.weight", ""});
  // Config values out of any sense.
  for (const auto& [key, value, message] :
       std::vector<std::tuple<std::string, double, std::string>>{
           {"factor", 1e308, "rope_scaling.factor: 1e+308 must be in 1..1024"},
           {"mscale", -1, "rope_scaling.mscale: -1 must be in (0, 100]"},
           {"mscale_all_dim", -2,
            "rope_scaling.mscale_all_dim: -2 must be in [0, 100]"}}) {
    faults.push_back({"rope_scaling." + key,
                      ConfigWith("/rope_scaling/" + key, value), message, ""});
  }
  faults.push_back({"rms_norm_eps 1e308", ConfigWith("/rms_norm_eps", 1e308),
                    "rms_norm_eps: 1e+308 must be in (0, 1)", ""});
  return faults;
}

TEST(DeepSeekV3BadCheckpointTest, EachFaultIsRefusedNamingIt) {
  for (const Fault& f : Faults()) {
    SCOPED_TRACE(f.label);
    dtest::TempDir tmp;
    const std::string dir = tmp.path() + "/ckpt";
    ASSERT_TRUE(testutil::RewriteCheckpoint(CkptDir(), dir, f.rewrite).ok());
    coordinator::EngineOptions o;
    o.model_dir = dir;
    o.mem = "1G";
    auto engine = coordinator::OpenEngine(o);
    ASSERT_FALSE(engine.ok()) << "opened a broken checkpoint";
    std::printf("%s: %s\n", f.label.c_str(),
                std::string(engine.status().message()).c_str());
    EXPECT_NE(engine.status().message().find(f.engine_error), std::string::npos)
        << engine.status();
    const testutil::CommandResult r = testutil::RunCommand(
        testutil::BinPath("flotilla-tool") + " pack --model " + dir +
            " --out " + tmp.path() + "/pack",
        tmp.path());
    EXPECT_TRUE(r.exited && r.code != 0) << "packed a broken checkpoint";
    const std::string want =
        f.pack_error.empty() ? f.engine_error : f.pack_error;
    EXPECT_NE((r.out + r.err).find(want), std::string::npos) << r.err;
  }
}

// Issue 44 item 7: a tensor a shard holds but the index's weight_map leaves
// out is a disagreement, refused naming both files and the tensor.
TEST(DeepSeekV3BadCheckpointTest, ATensorTheIndexLeavesOutIsRefused) {
  dtest::TempDir tmp;
  const std::string dir = tmp.path() + "/ckpt";
  ASSERT_TRUE(testutil::RewriteCheckpoint(CkptDir(), dir, {}).ok());
  const std::string index = dir + "/model.safetensors.index.json";
  nlohmann::json j = testutil::LoadJson(index);
  const std::string dropped = "model.layers.2.mlp.experts.3.up_proj.weight";
  ASSERT_EQ(j["weight_map"].erase(dropped), 1u);
  std::ofstream(index, std::ios::trunc) << j.dump();
  coordinator::EngineOptions o;
  o.model_dir = dir;
  o.mem = "1G";
  auto engine = coordinator::OpenEngine(o);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find(
                "holds tensor '" + dropped + "', which " + index +
                " does not name (weight_map leaves it out)"),
            std::string::npos)
      << engine.status();
}

// Row slices (pack --workers N --split) would cut FP8 experts' 128-row
// scale blocks: refused by name, not sliced wrong.
TEST(DeepSeekV3BadCheckpointTest, RowSplitOfFp8ExpertsIsRefused) {
  dtest::TempDir tmp;
  const testutil::CommandResult r = testutil::RunCommand(
      testutil::BinPath("flotilla-tool") + " pack --model " + CkptDir() +
          " --workers 2 --split --out " + tmp.path() + "/pack",
      tmp.path());
  EXPECT_TRUE(r.exited && r.code != 0);
  EXPECT_NE(r.err.find("is FP8 with 128x128 block scales, which row slices "
                       "cannot cut"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace flotilla
