// pack: resume after an interruption, --verify catching damage, and
// experts copied into experts.bin when a checkpoint scatters them.
#include <cstdlib>
#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/io/checksum.h"
#include "shared/pack/pack_manifest.h"
#include "tools/commands.h"
#include "tools/pack.h"
#include "tools/pack_test_util.h"

namespace flotilla::tools {
namespace {

using ::testing::HasSubstr;
using testing::kCkptA;
using testing::QuietOptions;
using testing::ReadAll;
using testing::ScratchDir;

// Small batches so the experts phase has many units to stop between.
constexpr uint64_t kSmallBatch = 16 << 10;

void ExpectSamePack(const std::string& a, const std::string& b) {
  for (const char* f :
       {"trunk.bin", "manifest.json", "expert_table.bin", "experts.bin"}) {
    ASSERT_EQ(std::filesystem::exists(a + "/" + f),
              std::filesystem::exists(b + "/" + f))
        << f;
    if (std::filesystem::exists(a + "/" + f)) {
      EXPECT_TRUE(ReadAll(a + "/" + f) == ReadAll(b + "/" + f)) << f;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(b + "/pack.state"));
}

TEST(PackResume, InterruptedPackEndsByteIdentical) {
  ScratchDir tmp("pack_resume");
  PackOptions whole = QuietOptions(kCkptA, tmp / "whole");
  whole.batch_bytes = kSmallBatch;
  ASSERT_TRUE(PackCheckpoint(whole).ok());
  // 16 regions, then expert batches: stop inside each phase, and twice.
  for (uint64_t stop : {1, 7, 16, 18}) {
    SCOPED_TRACE(stop);
    const std::string dir = tmp / ("part" + std::to_string(stop));
    PackOptions o = QuietOptions(kCkptA, dir);
    o.batch_bytes = kSmallBatch;
    o.threads = 1;
    o.stop_after_units = stop;
    absl::StatusOr<PackResult> r = PackCheckpoint(o);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kAborted) << r.status();
    EXPECT_TRUE(std::filesystem::exists(dir + "/pack.state"));
    EXPECT_FALSE(std::filesystem::exists(dir + "/manifest.json"));
    EXPECT_FALSE(pack::LoadPackManifest(dir).ok());
    r = PackCheckpoint(o);  // stops again after `stop` more units
    ASSERT_EQ(r.status().code(), absl::StatusCode::kAborted) << r.status();
    EXPECT_TRUE(r.status().message().find("resume") != std::string::npos);
    o.stop_after_units = 0;
    o.threads = 2;
    r = PackCheckpoint(o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->resumed);
    ExpectSamePack(whole.out_dir, dir);
  }
}

// The default model (Mixtral family) packs through the same packer:
// interrupted in the regions and in the experts, it resumes to the same
// bytes, and --verify names a damaged layer.
TEST(PackResume, TheDefaultModelResumesAndVerifies) {
  const std::string stories = std::string(FLOTILLA_TEST_DATA_DIR) +
                              "/../../models/stories260k-moe";
  ScratchDir tmp("pack_resume_stories");
  PackOptions whole = QuietOptions(stories, tmp / "whole");
  whole.batch_bytes = kSmallBatch;
  whole.verify = true;
  ASSERT_TRUE(PackCheckpoint(whole).ok());
  // 8 regions (5 layers, embed, lm_head, globals), then expert batches.
  for (uint64_t stop : {3, 8, 10}) {
    SCOPED_TRACE(stop);
    const std::string dir = tmp / ("part" + std::to_string(stop));
    PackOptions o = QuietOptions(stories, dir);
    o.batch_bytes = kSmallBatch;
    o.threads = 1;
    o.stop_after_units = stop;
    absl::StatusOr<PackResult> r = PackCheckpoint(o);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kAborted) << r.status();
    EXPECT_FALSE(std::filesystem::exists(dir + "/manifest.json"));
    o.stop_after_units = 0;
    r = PackCheckpoint(o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->resumed);
    ExpectSamePack(whole.out_dir, dir);
  }
  auto m = pack::LoadPackManifest(whole.out_dir);
  ASSERT_TRUE(m.ok()) << m.status();
  const pack::PackRegion* r = m->FindLayer(2);
  ASSERT_NE(r, nullptr);
  testing::FlipByte(whole.out_dir + "/trunk.bin", r->offset + r->size / 3);
  absl::Status s = VerifyPack(stories, whole.out_dir, 2, nullptr);
  ASSERT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("region layer 2:"));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("offset " + std::to_string(r->offset)));
}

TEST(PackResume, CliStopHookAndResume) {
  ScratchDir tmp("pack_resume_cli");
  ASSERT_TRUE(PackCheckpoint(QuietOptions(kCkptA, tmp / "whole")).ok());
  const std::string out = tmp / "cli";
  std::vector<std::string> args = {"pack", "--model", kCkptA, "--out", out};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  ::setenv("FLOTILLA_PACK_STOP_AFTER", "3", 1);
  EXPECT_EQ(RunPack(static_cast<int>(argv.size()), argv.data()), kExitFailure);
  ::unsetenv("FLOTILLA_PACK_STOP_AFTER");
  EXPECT_TRUE(std::filesystem::exists(out + "/pack.state"));
  EXPECT_EQ(RunPack(static_cast<int>(argv.size()), argv.data()), kExitOk);
  ExpectSamePack(tmp / "whole", out);
}

TEST(PackVerify, NamesTheDamagedRegion) {
  ScratchDir tmp("pack_verify_trunk");
  ASSERT_TRUE(PackCheckpoint(QuietOptions(kCkptA, tmp / "pack")).ok());
  auto m = pack::LoadPackManifest(tmp / "pack");
  ASSERT_TRUE(m.ok());
  for (const char* kind : {"layer", "embed"}) {
    SCOPED_TRACE(kind);
    const std::string copy = tmp / (std::string("copy_") + kind);
    std::filesystem::create_directories(copy);
    for (const char* f : {"trunk.bin", "manifest.json", "expert_table.bin"}) {
      std::filesystem::copy_file(tmp / "pack" + "/" + f, copy + "/" + f);
    }
    const pack::PackRegion* r =
        std::string(kind) == "layer" ? m->FindLayer(5) : m->FindRegion("embed");
    testing::FlipByte(copy + "/trunk.bin", r->offset + r->size / 3);
    absl::Status s = VerifyPack(kCkptA, copy, 2, nullptr);
    ASSERT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    const std::string msg(s.message());
    EXPECT_THAT(msg,
                HasSubstr(std::string(kind) == "layer" ? "region layer 5:"
                                                       : "region embed rows "));
    EXPECT_THAT(msg, HasSubstr(copy + "/trunk.bin"));
    if (std::string(kind) == "layer") {
      EXPECT_THAT(msg, HasSubstr("offset " + std::to_string(r->offset)));
    }
  }
}

TEST(PackVerify, NamesTheDamagedExpertInACopiedShard) {
  ScratchDir tmp("pack_verify_expert");
  const std::string model = tmp / "model";
  std::filesystem::create_directories(model);
  for (const char* f :
       {"config.json", "model.safetensors", "model.safetensors.index.json"}) {
    std::filesystem::copy_file(kCkptA + "/" + f, model + "/" + f);
  }
  PackOptions o =
      QuietOptions(model, "");  // default out: <model>/flotilla-pack
  o.verify = true;
  ASSERT_TRUE(PackCheckpoint(o).ok());
  const std::string pack = model + "/flotilla-pack";
  auto m = pack::LoadPackManifest(pack);
  ASSERT_TRUE(m.ok());
  const pack::PackExpert* e = m->FindExpert(3, 5);
  ASSERT_NE(e, nullptr);
  testing::FlipByte(model + "/model.safetensors", e->offset + e->length - 1);
  absl::Status s = VerifyPack(model, pack, 2, nullptr);
  ASSERT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(
      std::string(s.message()),
      HasSubstr("expert layer 3 expert 5: checksum mismatch in " + model +
                "/model.safetensors at offset " + std::to_string(e->offset)));
  // pack --verify reports it too (the pack itself is up to date).
  EXPECT_FALSE(PackCheckpoint(o).ok());
}

TEST(PackScattered, CopiesExpertsIntoExpertsBin) {
  ScratchDir tmp("pack_scattered");
  const std::string model = tmp / "model";
  ASSERT_NO_FATAL_FAILURE(testing::WriteScatteredCheckpoint(model));
  PackOptions o = QuietOptions(model, tmp / "pack");
  o.verify = true;
  absl::StatusOr<PackResult> r = PackCheckpoint(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->experts_in_model_dir);
  auto m = pack::LoadPackManifest(tmp / "pack");
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(m->experts_in_model_dir);
  ASSERT_EQ(m->expert_files, std::vector<std::string>{"experts.bin"});
  ASSERT_EQ(m->experts.size(), 96u);
  auto ckpt = model::SafetensorsCheckpoint::OpenDir(model);
  ASSERT_TRUE(ckpt.ok());
  const std::string bin = ReadAll(tmp / "pack/experts.bin");
  const char* kParts[6] = {"w1.weight_packed", "w1.weight_scale",
                           "w2.weight_packed", "w2.weight_scale",
                           "w3.weight_packed", "w3.weight_scale"};
  for (const pack::PackExpert& e : m->experts) {
    EXPECT_EQ(e.offset % 4096, 0u);
    ASSERT_LE(e.offset + e.length, bin.size());
    EXPECT_EQ(io::Checksum64(bin.data() + e.offset, e.length), e.checksum);
    for (int i = 0; i < 6; ++i) {
      const model::TensorInfo* t =
          (*ckpt)->Find("language_model.model.layers." +
                        std::to_string(e.layer) + ".block_sparse_moe.experts." +
                        std::to_string(e.expert) + "." + kParts[i]);
      ASSERT_NE(t, nullptr);
      std::string want(t->nbytes, '\0');
      ASSERT_TRUE((*ckpt)->ReadRaw(*t, want.data()).ok());
      EXPECT_EQ(bin.compare(e.offset + e.tensor_offsets[i], t->nbytes, want), 0)
          << t->name;
    }
  }
  // Same trunk tensors as ckpt_A: the same trunk.bin.
  ASSERT_TRUE(PackCheckpoint(QuietOptions(kCkptA, tmp / "packA")).ok());
  EXPECT_TRUE(ReadAll(tmp / "pack/trunk.bin") ==
              ReadAll(tmp / "packA/trunk.bin"));

  // Resume inside the expert copy gives the same experts.bin.
  PackOptions part = QuietOptions(model, tmp / "part");
  part.batch_bytes = kSmallBatch;
  part.threads = 1;
  part.stop_after_units = 20;
  ASSERT_EQ(PackCheckpoint(part).status().code(), absl::StatusCode::kAborted);
  part.stop_after_units = 0;
  ASSERT_TRUE(PackCheckpoint(part).ok());
  ExpectSamePack(tmp / "pack", tmp / "part");

  // Damage in experts.bin is named.
  testing::FlipByte(tmp / "part/experts.bin", m->FindExpert(7, 2)->offset + 10);
  absl::Status s = VerifyPack(model, tmp / "part", 1, nullptr);
  ASSERT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("expert layer 7 expert 2: checksum mismatch in " +
                        tmp / "part/experts.bin"));
}

}  // namespace
}  // namespace flotilla::tools
