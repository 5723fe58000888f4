// End to end: a synthesized k3-tiny checkpoint opens with the engine's
// K3Model::OpenDir and generates finite, non-trivial logits; the bytes and
// the generated ids depend on the seed and nothing else.
#include "tools/synth.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "coordinator/families/kimi_k3/model.h"
#include "gtest/gtest.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "tools/synth_config.h"
#include "tools/synth_test_util.h"

namespace flotilla::tools {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct GenRun {
  std::vector<int32_t> ids;
  std::vector<float> logits;  // every step's [vocab], concatenated
};

// Greedy decoding through the engine: prefill, then one token per step.
GenRun Generate(const std::string& dir, int steps) {
  GenRun run;
  coordinator::ModelOptions mo;
  mo.threads = 2;
  auto model = coordinator::K3Model::OpenDir(dir, "", mo);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return run;
  coordinator::SequenceState state = (*model)->NewSequence();
  std::vector<int32_t> input = {3, 7, 11, 5, 9};
  for (int s = 0; s < steps; ++s) {
    std::vector<float> logits;
    absl::Status st = (*model)->Forward(&state, input, false, &logits);
    EXPECT_TRUE(st.ok()) << st;
    if (!st.ok()) return run;
    const int32_t next = static_cast<int32_t>(
        std::max_element(logits.begin(), logits.end()) - logits.begin());
    run.ids.push_back(next);
    run.logits.insert(run.logits.end(), logits.begin(), logits.end());
    input = {next};
  }
  return run;
}

TEST(SynthTest, TinyCheckpointRunsAndGivesNonTrivialLogits) {
  const SynthDirs& d = TinyDirs();
  auto config = model::LoadK3Config(d.a + "/config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  auto preset = SynthPresetConfig("k3-tiny");
  ASSERT_TRUE(preset.ok());
  EXPECT_EQ(config->hidden_size, preset->hidden_size);
  EXPECT_EQ(config->full_attn_layers, preset->full_attn_layers);
  EXPECT_EQ(config->situ_linear_beta, preset->situ_linear_beta);
  EXPECT_EQ(config->rms_norm_eps, preset->rms_norm_eps);

  const GenRun run = Generate(d.a, 8);
  ASSERT_EQ(run.ids.size(), 8u);
  ASSERT_EQ(run.logits.size(), 8u * config->vocab_size);
  for (int s = 0; s < 8; ++s) {
    const float* row = run.logits.data() + s * config->vocab_size;
    const auto [lo, hi] = std::minmax_element(row, row + config->vocab_size);
    EXPECT_TRUE(std::all_of(row, row + config->vocab_size,
                            [](float x) { return std::isfinite(x); }))
        << "step " << s;
    EXPECT_GT(*hi - *lo, 1e-3f) << "step " << s;
  }
  // Not stuck on one token.
  EXPECT_GT(std::set<int32_t>(run.ids.begin(), run.ids.end()).size(), 1u);
}

TEST(SynthTest, SameSeedSameBytesAnyThreadsOrIoMode) {
  const SynthDirs& d = TinyDirs();
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(d.a)) {
    ++files;
    const fs::path other = fs::path(d.b) / e.path().filename();
    ASSERT_TRUE(fs::exists(other)) << other;
    EXPECT_TRUE(Slurp(e.path()) == Slurp(other)) << e.path().filename();
  }
  // 13 layer shards + the model-level shard + index + config.
  EXPECT_EQ(files, 16u);
  EXPECT_EQ(Generate(d.a, 6).ids, Generate(d.b, 6).ids);
}

TEST(SynthTest, OtherSeedOtherWeightsAndTokens) {
  const SynthDirs& d = TinyDirs();
  for (const auto& e : fs::directory_iterator(d.a)) {
    if (e.path().extension() != ".safetensors") continue;
    EXPECT_FALSE(Slurp(e.path()) == Slurp(fs::path(d.c) / e.path().filename()))
        << e.path().filename();
  }
  EXPECT_EQ(Slurp(fs::path(d.a) / "config.json"),
            Slurp(fs::path(d.c) / "config.json"));
  EXPECT_NE(Generate(d.a, 8).ids, Generate(d.c, 8).ids);
}

TEST(SynthTest, MergedShardsHoldTheSameTensors) {
  const SynthDirs& d = TinyDirs();
  const std::string dir = d.root + "/merged";
  SynthOptions o;
  o.config = *SynthPresetConfig("k3-tiny");
  o.out_dir = dir;
  o.seed = 7;
  o.shards = 3;
  ASSERT_TRUE(PrepareOutDir(dir, false, 0).ok());
  auto r = WriteSynthCheckpoint(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->shards, 3);
  EXPECT_TRUE(fs::exists(dir + "/model-00003-of-00003.safetensors"));
  EXPECT_FALSE(fs::exists(dir + "/model-00004-of-00003.safetensors"));
  // Tensor bytes depend on (seed, name) only, not on the file they are in.
  EXPECT_EQ(Generate(dir, 6).ids, Generate(d.a, 6).ids);
}

}  // namespace
}  // namespace flotilla::tools
