// pack on the tiny checkpoint: what it writes, read back and compared with
// the regions the engine builds in memory.
#include "tools/pack.h"

#include <cstring>

#include "coordinator/families/kimi_k3/region_binding.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/family/kimi_k3/kimi_k3_schema.h"
#include "shared/io/checksum.h"
#include "shared/model/checkpoint_fingerprint.h"
#include "shared/pack/pack_manifest.h"
#include "shared/pack/region_builder.h"
#include "tools/commands.h"
#include "tools/pack_test_util.h"
#include "tools/progress.h"

namespace flotilla::tools {
namespace {

using ::testing::HasSubstr;
using testing::kCkptA;
using testing::kCkptC;
using testing::QuietOptions;
using testing::ReadAll;
using testing::ScratchDir;

absl::StatusOr<pack::Region> BuildInMemory(const model::TensorSource& src,
                                           const model::K3Config& c,
                                           const pack::PackRegion& r) {
  if (r.kind == "layer")
    return family::kimi_k3::BuildLayerRegion(src, c, r.layer);
  if (r.kind == "embed")
    return family::kimi_k3::BuildVocabRegion(src, c, false);
  if (r.kind == "lm_head")
    return family::kimi_k3::BuildVocabRegion(src, c, true);
  return family::kimi_k3::BuildGlobalsRegion(src, c);
}

TEST(Pack, TinyCheckpointRegionsMatchTheEngine) {
  ScratchDir tmp("pack_a");
  absl::StatusOr<PackResult> r =
      PackCheckpoint(QuietOptions(kCkptA, tmp.path()));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->already_complete);
  EXPECT_TRUE(r->experts_in_model_dir);
  EXPECT_FALSE(std::filesystem::exists(tmp / "pack.state"));
  EXPECT_FALSE(std::filesystem::exists(tmp / "experts.bin"));

  absl::StatusOr<pack::PackManifest> m = pack::LoadPackManifest(tmp.path());
  ASSERT_TRUE(m.ok()) << m.status();
  auto ckpt = model::SafetensorsCheckpoint::OpenDir(kCkptA);
  ASSERT_TRUE(ckpt.ok());
  auto config = model::LoadK3Config(kCkptA + "/config.json");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(m->config_json, ReadAll(kCkptA + "/config.json"));
  EXPECT_EQ(m->source_fingerprint,
            *model::FingerprintCheckpoint(kCkptA, **ckpt));
  ASSERT_EQ(m->regions.size(), 16u);

  const std::string trunk = ReadAll(tmp / "trunk.bin");
  uint64_t end = 0;
  for (const pack::PackRegion& region : m->regions) {
    SCOPED_TRACE(region.kind + " " + std::to_string(region.layer));
    EXPECT_EQ(region.offset % 4096, 0u);
    ASSERT_LE(region.offset + region.size, trunk.size());
    end = std::max(end, region.offset + region.size);
    const uint8_t* bytes =
        reinterpret_cast<const uint8_t*>(trunk.data()) + region.offset;
    EXPECT_EQ(io::Checksum64(bytes, region.size), region.checksum);
    // Read back from trunk.bin == built in memory, and it binds.
    absl::StatusOr<pack::Region> built = BuildInMemory(**ckpt, *config, region);
    ASSERT_TRUE(built.ok()) << built.status();
    ASSERT_EQ(built->layout.size, region.size);
    EXPECT_EQ(pack::LayoutToJson(built->layout),
              pack::LayoutToJson(region.layout));
    EXPECT_EQ(std::memcmp(built->bytes.data(), bytes, region.size), 0);
    const pack::RegionLayout* layout = &region.layout;
    if (region.kind == "layer") {
      EXPECT_TRUE(
          coordinator::BindLayer(*layout, bytes, *config, region.layer).ok());
    } else if (region.kind == "globals") {
      EXPECT_TRUE(coordinator::BindGlobals(*layout, bytes, *config).ok());
    } else {
      EXPECT_TRUE(coordinator::BindVocab(*layout, bytes, *config).ok());
      // 256 rows in chunks of 64, each checksummed over the matrix rows.
      ASSERT_EQ(region.chunk_rows, pack::kVocabChunkRows);
      ASSERT_EQ(region.chunk_checksums.size(), 4u);
      const pack::RegionField* f = layout->Find("matrix");
      const uint64_t chunk = f->nbytes / 4;
      for (size_t k = 0; k < 4; ++k) {
        EXPECT_EQ(io::Checksum64(bytes + f->offset + k * chunk, chunk),
                  region.chunk_checksums[k]);
      }
    }
  }
  EXPECT_EQ(end, trunk.size());

  // Experts in place: one run per expert in the shard, at its tensors.
  EXPECT_TRUE(m->experts_in_model_dir);
  EXPECT_EQ(m->expert_format, "mxfp4");
  ASSERT_EQ(m->expert_files, std::vector<std::string>{"model.safetensors"});
  ASSERT_EQ(m->experts.size(), 12u * 8u);
  const std::string shard = ReadAll(kCkptA + "/model.safetensors");
  const char* kParts[6] = {"w1.weight_packed", "w1.weight_scale",
                           "w2.weight_packed", "w2.weight_scale",
                           "w3.weight_packed", "w3.weight_scale"};
  for (const pack::PackExpert& e : m->experts) {
    const std::string base =
        "language_model.model.layers." + std::to_string(e.layer) +
        ".block_sparse_moe.experts." + std::to_string(e.expert) + ".";
    uint64_t length = 0;
    for (int i = 0; i < 6; ++i) {
      const model::TensorInfo* t = (*ckpt)->Find(base + kParts[i]);
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(e.offset + e.tensor_offsets[i], t->offset) << t->name;
      length += t->nbytes;
    }
    EXPECT_EQ(e.length, length);
    EXPECT_EQ(e.tensor_offsets[0], 0u);
    EXPECT_EQ(io::Checksum64(shard.data() + e.offset, e.length), e.checksum);
  }
  ASSERT_NE(m->FindExpert(12, 7), nullptr);
  EXPECT_EQ(m->FindExpert(0, 0), nullptr);
}

TEST(Pack, RerunIsANoOpAndVerifyPasses) {
  ScratchDir tmp("pack_rerun");
  PackOptions o = QuietOptions(kCkptA, tmp.path());
  ASSERT_TRUE(PackCheckpoint(o).ok());
  const std::string trunk = ReadAll(tmp / "trunk.bin");
  const std::string manifest = ReadAll(tmp / "manifest.json");
  o.verify = true;
  absl::StatusOr<PackResult> again = PackCheckpoint(o);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->already_complete);
  EXPECT_EQ(ReadAll(tmp / "trunk.bin"), trunk);
  EXPECT_EQ(ReadAll(tmp / "manifest.json"), manifest);
  EXPECT_TRUE(VerifyPack(kCkptA, tmp.path(), 2, nullptr).ok());
}

TEST(Pack, RefusesAPackOfAnotherCheckpoint) {
  ScratchDir tmp("pack_other");
  ASSERT_TRUE(PackCheckpoint(QuietOptions(kCkptA, tmp.path())).ok());
  absl::Status verify = VerifyPack(kCkptC, tmp.path(), 1, nullptr);
  EXPECT_EQ(verify.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(verify.message()), HasSubstr("another checkpoint"));

  PackOptions o = QuietOptions(kCkptC, tmp.path());
  absl::StatusOr<PackResult> r = PackCheckpoint(o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("another checkpoint"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("--force"));
  o.force = true;
  o.verify = true;
  r = PackCheckpoint(o);
  ASSERT_TRUE(r.ok()) << r.status();
  auto m = pack::LoadPackManifest(tmp.path());
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->regions.size(), 14u + 3u);
}

TEST(Pack, RefusesStrayPackFilesWithoutARecord) {
  ScratchDir tmp("pack_stray");
  testing::WriteAll(tmp / "trunk.bin", "junk");
  PackOptions o = QuietOptions(kCkptA, tmp.path());
  absl::StatusOr<PackResult> r = PackCheckpoint(o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("pack files"));
  o.force = true;
  EXPECT_TRUE(PackCheckpoint(o).ok());
}

TEST(PackCli, ExitCodesAndMessages) {
  ScratchDir tmp("pack_cli");
  auto run = [](std::vector<std::string> args) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    return RunPack(static_cast<int>(argv.size()), argv.data());
  };
  EXPECT_EQ(run({"pack", "--help"}), kExitOk);
  EXPECT_EQ(run({"pack"}), kExitUsage);
  EXPECT_EQ(run({"pack", "--model", kCkptA, "--threads", "0"}), kExitUsage);
  EXPECT_EQ(run({"pack", "--model", kCkptA, "--bogus"}), kExitUsage);
  EXPECT_EQ(run({"pack", "--model", tmp / "missing", "--out", tmp / "p"}),
            kExitFailure);
  EXPECT_EQ(run({"pack", "--model", kCkptA, "--out", tmp / "p", "--verify",
                 "--threads", "3"}),
            kExitOk);
}

TEST(Progress, LineShowsBytesRateAndEta) {
  const std::string line =
      ProgressMeter::Line("pack", 500000000, 1000000000, 1e8);
  EXPECT_THAT(line, HasSubstr("pack: 500.00 MB / 1.00 GB (50.0%)"));
  EXPECT_THAT(line, HasSubstr("100.00 MB/s"));
  EXPECT_THAT(line, HasSubstr("ETA 5s"));
  EXPECT_THAT(ProgressMeter::Line("x", 0, 10, 0), HasSubstr("ETA --"));
}

}  // namespace
}  // namespace flotilla::tools
