// CheckPackSource: the stamp's fast path and its fallback to the full
// fingerprint, on a copy of ckpt_A.
#include "shared/pack/pack_source.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/model/checkpoint_fingerprint.h"
#include "shared/model/json_util.h"
#include "shared/model/safetensors.h"

namespace flotilla::pack {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kCkptA = std::string(FLOTILLA_TEST_DATA_DIR) + "/k3/ckpt_A";

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

class PackSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/pack_source_test_" +
           std::to_string(::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (const char* f :
         {"config.json", "model.safetensors", "model.safetensors.index.json"}) {
      fs::copy_file(kCkptA + "/" + f, dir_ + "/" + f);
    }
    auto source = model::SafetensorsCheckpoint::OpenDir(dir_);
    ASSERT_TRUE(source.ok()) << source.status();
    m_.source_fingerprint = *model::FingerprintCheckpoint(dir_, **source);
    m_.source_shards = model::CheckpointShards(dir_, **source);
    auto stamp = model::CheckpointStamp(dir_, m_.source_shards);
    ASSERT_TRUE(stamp.ok()) << stamp.status();
    m_.source_stamp = *stamp;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string dir_;
  PackManifest m_;
};

TEST_F(PackSourceTest, StampIsStableAndNamesTheShards) {
  EXPECT_EQ(m_.source_shards, std::vector<std::string>{"model.safetensors"});
  EXPECT_EQ(m_.source_stamp.size(), 16u);
  EXPECT_EQ(*model::CheckpointStamp(dir_, m_.source_shards), m_.source_stamp);
  EXPECT_TRUE(CheckPackSource(m_, dir_, "P").ok());
}

TEST_F(PackSourceTest, ReformattedIndexChangesTheStampButStillMatches) {
  const std::string index = dir_ + "/model.safetensors.index.json";
  const std::string text = *model::internal::ReadSmallFile(index);
  WriteText(index, nlohmann::json::parse(text).dump(3));
  EXPECT_NE(*model::CheckpointStamp(dir_, m_.source_shards), m_.source_stamp);
  // Same tensors: the full fingerprint agrees, so the pack is still good.
  EXPECT_TRUE(CheckPackSource(m_, dir_, "P").ok());
}

TEST_F(PackSourceTest, AnotherCheckpointIsRefusedNamingBoth) {
  // config.json is part of the fingerprint; a changed value is another
  // checkpoint.
  const std::string config = dir_ + "/config.json";
  nlohmann::json c =
      nlohmann::json::parse(*model::internal::ReadSmallFile(config));
  c["rms_norm_eps"] = 1e-3;
  WriteText(config, c.dump());
  const absl::Status s = CheckPackSource(m_, dir_, "P");
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(m_.source_fingerprint));
  EXPECT_THAT(std::string(s.message()), HasSubstr("re-run flotilla-tool pack"));
}

TEST_F(PackSourceTest, AShardGoneIsAnErrorNotAMatch) {
  fs::remove(dir_ + "/model.safetensors");
  EXPECT_FALSE(model::CheckpointStamp(dir_, m_.source_shards).ok());
  const absl::Status s = CheckPackSource(m_, dir_, "P");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("model.safetensors"));
}

TEST_F(PackSourceTest, AChangedHeaderChangesTheStamp) {
  // Flip one byte inside the JSON header (a tensor name's letter): the
  // stamp must see it even though sizes are unchanged.
  const std::string shard = dir_ + "/model.safetensors";
  std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(8);
  std::string head(256, '\0');
  f.read(head.data(), head.size());
  const size_t at = head.find("model.");
  ASSERT_NE(at, std::string::npos);
  f.seekp(8 + at);
  f.put('M');
  f.close();
  EXPECT_NE(*model::CheckpointStamp(dir_, m_.source_shards), m_.source_stamp);
  EXPECT_FALSE(CheckPackSource(m_, dir_, "P").ok());
}

// Same layout, other weights (what two synth seeds or a fine-tune are):
// the data samples make it another checkpoint, for the fingerprint and for
// the stamp alike. The last data byte is the last sample's.
TEST_F(PackSourceTest, OtherWeightsInTheSameLayoutAreAnotherCheckpoint) {
  const std::string shard = dir_ + "/model.safetensors";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    const char last = static_cast<char>(f.get());
    f.seekp(-1, std::ios::end);
    f.put(static_cast<char>(last ^ 0x01));
  }
  EXPECT_NE(*model::CheckpointStamp(dir_, m_.source_shards), m_.source_stamp);
  auto source = model::SafetensorsCheckpoint::OpenDir(dir_);
  ASSERT_TRUE(source.ok()) << source.status();
  const std::string other = *model::FingerprintCheckpoint(dir_, **source);
  EXPECT_NE(other, m_.source_fingerprint);
  const absl::Status s = CheckPackSource(m_, dir_, "P");
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(m_.source_fingerprint));
  EXPECT_THAT(std::string(s.message()), HasSubstr(other));
}

}  // namespace
}  // namespace flotilla::pack
