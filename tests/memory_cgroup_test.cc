// A model larger than the budget runs to completion inside a memory cgroup
// (v1, or v2 as on a stock Debian 12 machine) whose limit is the budget,
// with logits bitwise those of an unlimited run. The page cache is charged to
// the cgroup, so this holds only because every weight read bypasses it
// (O_DIRECT), and the plan bounds everything else the process holds.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/io/cgroup.h"
#include "shared/testing/fixture.h"
#include "shared/testing/process.h"

namespace flotilla {
namespace {

namespace fs = std::filesystem;
using testutil::BinPath;
using testutil::CommandResult;

// A synthetic K3 of ~250 MB: 256 experts of 104 KB in 7 MoE layers and a
// trunk too large to pin whole within the budget.
constexpr char kConfig[] = R"({
  "hidden_size": 512, "num_hidden_layers": 8, "vocab_size": 4096,
  "rms_norm_eps": 1e-5, "kda_num_heads": 8, "kda_head_dim": 64,
  "short_conv_kernel_size": 4, "gate_lower_bound": -5.0,
  "num_attention_heads": 4, "q_lora_rank": 128, "kv_lora_rank": 64,
  "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32,
  "mla_use_output_gate": true, "num_experts": 256,
  "num_experts_per_token": 8, "num_shared_experts": 2,
  "routed_expert_hidden_size": 256, "moe_intermediate_size": 256,
  "routed_scaling_factor": 1.0, "moe_renormalize": true,
  "latent_moe_use_norm": true, "first_k_dense_replace": 1,
  "intermediate_size": 2048, "attn_res_block_size": 3, "situ_beta": 4.0,
  "situ_linear_beta": 25.0, "full_attn_layers": [4, 8]})";

constexpr uint64_t kBudget = 64ull << 20;

TEST(MemoryCgroupTest, ModelLargerThanBudgetRunsInsideCgroupLimit) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizer's shadow memory (and ASan's quarantine) "
                  "make the binaries' RSS unrelated to the memory plan";
#endif
  if (absl::Status s = io::cgroup::MemoryAvailable(); !s.ok()) {
    GTEST_SKIP() << "memory cgroup unavailable: " << s;
  }
  const fs::path tmp = fs::temp_directory_path() /
                       ("flotilla_cgroup_" + std::to_string(getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  const std::string scratch = tmp.string();
  std::ofstream(tmp / "config.json") << kConfig;
  CommandResult r = testutil::RunCommand(
      BinPath("flotilla-tool") + " synth --config " + scratch +
          "/config.json --out " + scratch + "/model --seed 5",
      scratch);
  ASSERT_EQ(r.code, 0) << r.err;
  r = testutil::RunCommand(
      BinPath("flotilla-tool") + " pack --model " + scratch + "/model",
      scratch);
  ASSERT_EQ(r.code, 0) << r.err;
  uint64_t model_bytes = 0;
  for (const auto& e : fs::directory_iterator(tmp / "model")) {
    if (e.is_regular_file()) model_bytes += e.file_size();
  }
  ASSERT_GT(model_bytes, 3 * kBudget) << "the model must dwarf the budget";

  const std::string generate =
      BinPath("flotilla-coordinator") + " generate --model " + scratch +
      "/model --ids 1,2,3,4 --max-tokens 6 --json --max-context 256 "
      "--prefill-chunk 16";
  // Reference: the same streaming engine without any limit.
  r = testutil::RunCommand(
      generate + " --mem 4G --dump-logits " + scratch + "/free.logits",
      scratch);
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json free_run = nlohmann::json::parse(r.out);

  // Drop this model from the page cache so the limited run starts cold.
  testutil::RunCommand("sync; echo 1 > /proc/sys/vm/drop_caches", scratch);
  auto group =
      io::cgroup::Create("memory", "flotilla-test-" + std::to_string(getpid()));
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_TRUE(io::cgroup::SetMemoryLimit(*group, kBudget).ok());
  // A fresh sh moves itself into the group and then becomes the coordinator
  // (in a subshell $$ would name the parent shell instead).
  r = testutil::RunCommand("sh -c 'echo $$ > " + group->dir +
                               "/cgroup.procs && exec " + generate + " --mem " +
                               std::to_string(kBudget) + " --dump-logits " +
                               scratch + "/limited.logits'",
                           scratch);
  const auto max_usage = io::cgroup::MemoryMaxUsage(*group);
  const auto ooms = io::cgroup::MemoryOomKills(*group);
  EXPECT_TRUE(io::cgroup::Remove(*group).ok());
  ASSERT_TRUE(r.exited) << "killed; stderr: " << r.err;
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json limited = nlohmann::json::parse(r.out);
  EXPECT_EQ(limited["generated_ids"], free_run["generated_ids"]);
  const std::vector<float> free_logits =
      testutil::ReadF32File(scratch + "/free.logits");
  const std::vector<float> limited_logits =
      testutil::ReadF32File(scratch + "/limited.logits");
  ASSERT_EQ(free_logits.size(), 6u * 4096);
  EXPECT_TRUE(limited_logits == free_logits)
      << "logits differ under the cgroup limit, max diff "
      << testutil::MaxAbsDiff(limited_logits, free_logits);
  EXPECT_EQ(limited["stats"]["mode"], "streaming");
  EXPECT_TRUE(limited["stats"]["direct_io"].get<bool>());
  EXPECT_LT(limited["stats"]["pinned_layers"].get<int>(), 8);
  EXPECT_LE(limited["stats"]["peak_rss_bytes"].get<uint64_t>(), kBudget);
  ASSERT_TRUE(max_usage.ok());
  EXPECT_LE(*max_usage, kBudget);
  EXPECT_GT(*max_usage, 0u) << "the coordinator did not run in the group";
  std::printf(
      "model %.1f MB, budget %.1f MB, cgroup max usage %.1f MB, "
      "peak RSS %.1f MB, pinned layers %d\n",
      model_bytes / 1e6, kBudget / 1e6, *max_usage / 1e6,
      limited["stats"]["peak_rss_bytes"].get<uint64_t>() / 1e6,
      limited["stats"]["pinned_layers"].get<int>());
  if (ooms.ok()) EXPECT_EQ(*ooms, 0u);
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace flotilla
