// pack --workers N --split: every worker folder holds, for every routed
// expert, exactly its row slice of the source tensors.
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/model/checkpoint_fingerprint.h"
#include "shared/model/safetensors.h"
#include "shared/model/safetensors_writer.h"
#include "shared/placement/expert_split.h"
#include "tools/commands.h"
#include "tools/pack_test_util.h"
#include "tools/pack_workers.h"
#include "tools/synth.h"
#include "tools/synth_config.h"

namespace flotilla::tools {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::kCkptA;
using testing::ReadAll;
using testing::ScratchDir;

constexpr char kExpertsInfix[] = ".block_sparse_moe.experts.";

int RunPackArgs(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return RunPack(static_cast<int>(argv.size()), argv.data());
}

PackWorkersOptions SplitOptions(const std::string& model,
                                const std::string& out, int workers) {
  PackWorkersOptions o;
  o.model_dir = model;
  o.out_dir = out;
  o.workers = workers;
  o.split = true;
  o.progress = nullptr;
  return o;
}

// k3-tiny with I = 96 != L = 64, so a w1/w2 mix-up cannot pass.
model::K3Config WideConfig() {
  model::K3Config c = *SynthPresetConfig("k3-tiny");
  c.moe_intermediate_size = 96;
  return c;
}

void SynthWide(const std::string& dir) {
  SynthOptions o;
  o.config = WideConfig();
  o.out_dir = dir;
  o.seed = 11;
  o.threads = 2;
  o.direct_io = false;
  ASSERT_TRUE(PrepareOutDir(dir, false, 0).ok());
  auto r = WriteSynthCheckpoint(o);
  ASSERT_TRUE(r.ok()) << r.status();
}

// A checkpoint of dense experts only (w1/w3 [I][L], w2 [L][I]; BF16, and
// F32 in the last MoE layer) with the wide config.
void WriteDenseExperts(const std::string& dir, model::DType dtype) {
  const model::K3Config c = WideConfig();
  fs::create_directories(dir);
  ASSERT_TRUE(WriteSynthConfig(c, dir).ok());
  std::vector<model::TensorToWrite> tensors;
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    if (c.IsDenseLayer(layer)) continue;
    for (int e = 0; e < c.num_experts; ++e) {
      const std::string base = "language_model.model.layers." +
                               std::to_string(layer) + kExpertsInfix +
                               std::to_string(e) + ".";
      const int64_t i = c.moe_intermediate_size,
                    l = c.routed_expert_hidden_size;
      const uint64_t seed = static_cast<uint64_t>(layer * 1000 + e * 3);
      int w = 0;
      for (const auto& shape : {std::vector<int64_t>{i, l}, {l, i}, {i, l}}) {
        ++w;
        tensors.push_back(
            {base + "w" + std::to_string(w) + ".weight", dtype, shape,
             [s = seed + w](uint64_t offset, uint64_t size, uint8_t* dst) {
               for (uint64_t b = 0; b < size; ++b) {
                 dst[b] = static_cast<uint8_t>((offset + b) * 131 + s * 7 +
                                               ((offset + b) >> 8));
               }
             }});
      }
    }
  }
  auto writer = model::SafetensorsWriter::Create({});
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->WriteShard(dir + "/model.safetensors", tensors).ok());
}

// Every folder: config.json verbatim, split.json naming (N, K), no
// placement.json, and every expert tensor holding the right rows.
void ExpectSplitFolders(const std::string& model_dir,
                        const std::string& workers_dir, int n) {
  auto src = model::SafetensorsCheckpoint::OpenDir(model_dir);
  ASSERT_TRUE(src.ok()) << src.status();
  auto config = model::LoadK3Config(model_dir + "/config.json");
  ASSERT_TRUE(config.ok());
  const std::string fingerprint =
      *model::FingerprintCheckpoint(model_dir, **src);
  std::vector<std::string> expert_names;
  for (const std::string& name : (*src)->Names()) {
    if (name.find(kExpertsInfix) != std::string::npos) {
      expert_names.push_back(name);
    }
  }
  ASSERT_FALSE(expert_names.empty());
  for (int k = 0; k < n; ++k) {
    SCOPED_TRACE("worker " + std::to_string(k) + " of " + std::to_string(n));
    const std::string folder = workers_dir + "/worker-" + std::to_string(k);
    EXPECT_EQ(ReadAll(folder + "/config.json"),
              ReadAll(model_dir + "/config.json"));
    EXPECT_FALSE(fs::exists(folder + "/placement.json"));
    auto split = placement::ExpertSplit::Load(folder + "/split.json");
    ASSERT_TRUE(split.ok()) << split.status();
    EXPECT_EQ(split->workers, n);
    EXPECT_EQ(split->worker, k);
    EXPECT_EQ(split->intermediate,
              static_cast<uint64_t>(config->moe_intermediate_size));
    EXPECT_EQ(split->latent,
              static_cast<uint64_t>(config->routed_expert_hidden_size));
    EXPECT_EQ(split->source_fingerprint, fingerprint);

    const std::string shard = folder + "/experts.safetensors";
    auto out = model::SafetensorsCheckpoint::OpenFile(shard);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ((*out)->Names(), expert_names);
    // Metadata, and tensors back to back in name order.
    const std::string file = ReadAll(shard);
    uint64_t header_len = 0;
    std::memcpy(&header_len, file.data(), 8);
    const auto header = nlohmann::json::parse(file.substr(8, header_len));
    EXPECT_EQ(header["__metadata__"]["flotilla_source_fingerprint"],
              fingerprint);
    uint64_t next = (*out)->Find(expert_names[0])->offset;
    for (const std::string& name : expert_names) {
      SCOPED_TRACE(name);
      const model::TensorInfo* s = (*src)->Find(name);
      const model::TensorInfo* t = (*out)->Find(name);
      const bool w2 = name.find(".w2.") != std::string::npos;
      const placement::RowRange rows =
          w2 ? split->latent_rows() : split->inter_rows();
      ASSERT_EQ(t->dtype, s->dtype);
      std::vector<int64_t> shape = s->shape;
      shape[0] = static_cast<int64_t>(rows.size());
      ASSERT_EQ(t->shape, shape);
      EXPECT_EQ(t->offset, next);
      next = t->offset + t->nbytes;
      std::string whole(s->nbytes, '\0'), slice(t->nbytes, '\0');
      ASSERT_TRUE((*src)->ReadRaw(*s, whole.data()).ok());
      ASSERT_TRUE((*out)->ReadRaw(*t, slice.data()).ok());
      const uint64_t row_bytes = s->nbytes / s->shape[0];
      ASSERT_EQ(slice.size(), rows.size() * row_bytes);
      EXPECT_TRUE(slice == whole.substr(rows.begin * row_bytes, slice.size()));
    }
  }
  EXPECT_FALSE(fs::exists(workers_dir + "/worker-" + std::to_string(n)));
}

TEST(PackSplit, CliCutsTheFixtureIntoTwoSlicesAndResumes) {
  ScratchDir tmp("pack_split_cli");
  ASSERT_EQ(RunPackArgs({"pack", "--model", kCkptA, "--out", tmp / "p",
                         "--workers", "2", "--split"}),
            kExitOk);
  ExpectSplitFolders(kCkptA, tmp / "p/workers", 2);
  absl::StatusOr<PackWorkersResult> again =
      PackWorkers(SplitOptions(kCkptA, tmp / "p/workers", 2));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->skipped, 2);
  EXPECT_EQ(again->bytes, 0u);
}

TEST(PackSplit, Mxfp4WithUnequalWidthsInThreeSlices) {
  ScratchDir tmp("pack_split_mxfp4");
  SynthWide(tmp / "model");
  const PackWorkersOptions o = SplitOptions(tmp / "model", tmp / "w", 3);
  absl::StatusOr<PackWorkersResult> r = PackWorkers(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->folders.size(), 3u);
  EXPECT_EQ(r->skipped, 0);
  EXPECT_GT(r->bytes, 0u);
  ExpectSplitFolders(tmp / "model", tmp / "w", 3);

  // Rerun: every folder is up to date. Without its split.json a folder is
  // rewritten, and only that one.
  r = PackWorkers(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->skipped, 3);
  fs::remove(tmp / "w/worker-1/split.json");
  r = PackWorkers(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->skipped, 2);
  ExpectSplitFolders(tmp / "model", tmp / "w", 3);
}

// Both dense dtypes, one per checkpoint: a worker serves one expert format
// (ExpertIndex), and pack --workers indexes each folder it writes to
// checksum its experts.
TEST(PackSplit, DenseExpertsInTwoAndThreeSlices) {
  ScratchDir tmp("pack_split_dense");
  for (model::DType dtype : {model::DType::kBF16, model::DType::kF32}) {
    const std::string model = tmp / absl::StrCat("model", int(dtype));
    WriteDenseExperts(model, dtype);
    for (int n : {2, 3}) {
      const std::string out = tmp / absl::StrCat("w", int(dtype), "-", n);
      absl::StatusOr<PackWorkersResult> r =
          PackWorkers(SplitOptions(model, out, n));
      ASSERT_TRUE(r.ok()) << r.status();
      ExpectSplitFolders(model, out, n);
    }
  }
}

TEST(PackSplit, ReplacesAWholeExpertFolderAndBack) {
  ScratchDir tmp("pack_split_switch");
  PackWorkersOptions o = SplitOptions(kCkptA, tmp / "w", 2);
  o.split = false;
  ASSERT_TRUE(PackWorkers(o).ok());
  ASSERT_TRUE(fs::exists(tmp / "w/worker-0/placement.json"));
  o.split = true;
  absl::StatusOr<PackWorkersResult> r = PackWorkers(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->skipped, 0);
  ExpectSplitFolders(kCkptA, tmp / "w", 2);
  o.split = false;
  r = PackWorkers(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->skipped, 0);
  EXPECT_TRUE(fs::exists(tmp / "w/worker-1/placement.json"));
  EXPECT_FALSE(fs::exists(tmp / "w/worker-1/split.json"));
}

TEST(PackSplit, RefusesBadFleetsAndShapesBeforeWriting) {
  ScratchDir tmp("pack_split_refuse");
  // More workers than rows (ckpt_A: I = L = 64).
  absl::StatusOr<PackWorkersResult> r =
      PackWorkers(SplitOptions(kCkptA, tmp / "w", 65));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("moe_intermediate_size 64"));
  PackWorkersOptions o = SplitOptions(kCkptA, tmp / "w", 2);
  o.replicas = 2;
  r = PackWorkers(o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("--replicas"));

  // A config whose I does not match the tensors: the error names one.
  const std::string model = tmp / "model";
  fs::create_directories(model);
  fs::copy_file(kCkptA + "/model.safetensors", model + "/model.safetensors");
  auto config = nlohmann::json::parse(ReadAll(kCkptA + "/config.json"));
  config["moe_intermediate_size"] = 96;
  testing::WriteAll(model + "/config.json", config.dump());
  r = PackWorkers(SplitOptions(model, tmp / "w", 2));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("experts.0.w1.weight_packed has 64 rows, expected 96"));
  EXPECT_FALSE(fs::exists(tmp / "w"));
}

TEST(PackSplit, CliRefusesSplitWithReplicasOrWithoutWorkers) {
  ScratchDir tmp("pack_split_usage");
  const std::string out = tmp / "p";
  EXPECT_EQ(RunPackArgs({"pack", "--model", kCkptA, "--out", out, "--workers",
                         "2", "--replicas", "2", "--split"}),
            kExitUsage);
  EXPECT_EQ(RunPackArgs({"pack", "--model", kCkptA, "--out", out, "--split"}),
            kExitUsage);
  EXPECT_EQ(RunPackArgs({"pack", "--model", kCkptA, "--out", out, "--workers",
                         "0", "--split"}),
            kExitUsage);
  EXPECT_FALSE(fs::exists(out));  // refused before packing anything
}

}  // namespace
}  // namespace flotilla::tools
