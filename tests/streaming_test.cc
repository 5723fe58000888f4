// Streaming within a memory budget (flotilla-tool pack + flotilla-coordinator
// --mem): the output must be bitwise identical whatever is pinned, streamed,
// cached or prefetched and whatever the thread count; damaged bytes on disk
// must be caught before use, naming where they are.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/pack/pack_manifest.h"
#include "shared/testing/fixture.h"
#include "shared/testing/io_test_util.h"
#include "shared/testing/process.h"

namespace flotilla {
namespace {

namespace fs = std::filesystem;
using testutil::BinPath;
using testutil::CommandResult;
using testutil::DataPath;
using testutil::ReadFileBytes;

class StreamingTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string name =
        ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : name) {
      if (c == '/') c = '_';
    }
    tmp_ = fs::temp_directory_path() /
           ("flotilla_stream_" + std::to_string(getpid()) + "_" + name);
    fs::remove_all(tmp_);
    fs::create_directories(tmp_);
    model_ = (tmp_ / "model").string();
    fs::create_directories(model_);
    testutil::CopyFixtureCheckpoint(GetParam(), model_);
    const CommandResult pack =
        Run(BinPath("flotilla-tool") + " pack --model " + model_);
    ASSERT_EQ(pack.code, 0) << pack.err;
    ref_ = DataPath("k3/" + GetParam() + "/ref/ref.json");
  }
  void TearDown() override { fs::remove_all(tmp_); }

  CommandResult Run(const std::string& cmd) {
    return testutil::RunCommand(cmd, tmp_.string());
  }

  // Generates the reference continuation; returns the --json output and
  // leaves the logits in `logits_path`.
  nlohmann::json Generate(const std::string& flags,
                          const std::string& logits_path,
                          CommandResult* result = nullptr) {
    const nlohmann::json ref = testutil::LoadJson(ref_);
    std::string ids;
    for (const auto& id : ref["prompt_ids"]) {
      ids += (ids.empty() ? "" : ",") + std::to_string(id.get<int>());
    }
    const CommandResult r =
        Run(BinPath("flotilla-coordinator") + " generate --model " + model_ +
            " --ids " + ids + " --max-tokens " +
            std::to_string(ref["n_new"].get<int>()) +
            " --json --max-context 64 --prefill-chunk 3 --dump-logits " +
            logits_path + " " + flags);
    if (result != nullptr) *result = r;
    if (r.code != 0) return nullptr;
    return nlohmann::json::parse(r.out, nullptr, false);
  }

  fs::path tmp_;
  std::string model_, ref_;
};

// Pinned all / some / none, vocab pinned or streamed, threads 1 and 2, expert
// cache and lookahead prefetch, both I/O engines: the logits of every
// configuration are byte-identical to the in-memory engine's.
TEST_P(StreamingTest, LogitsBitwiseIdenticalAcrossBudgets) {
  const std::string ref_logits = (tmp_ / "ref.f32").string();
  {
    const nlohmann::json ref = testutil::LoadJson(ref_);
    const CommandResult r =
        Run(BinPath("flotilla-coordinator") + " generate --model " +
            DataPath("k3/" + GetParam()) + " --json --ids " +
            [&] {
              std::string s;
              for (const auto& id : ref["prompt_ids"]) {
                s += (s.empty() ? "" : ",") + std::to_string(id.get<int>());
              }
              return s;
            }() +
            " --max-tokens " + std::to_string(ref["n_new"].get<int>()) +
            " --dump-logits " + ref_logits);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["generated_ids"],
              ref["generated_ids"]);
  }
  const std::string want = ReadFileBytes(ref_logits);
  ASSERT_FALSE(want.empty());
  const std::vector<std::string> configs = {
      "--max-pinned-layers -1 --threads 2 --expert-prefetch=false",
      "--max-pinned-layers 5 --threads 1",
      "--max-pinned-layers 0 --stream-vocab --threads 2",
      "--max-pinned-layers 0 --stream-vocab --threads 1 --reader pread "
      "--expert-prefetch=false",
      "--max-pinned-layers 7 --stream-vocab --expert-cache 1M --threads 2",
      "--max-pinned-layers 0 --expert-prefetch --threads 2",
      "--max-pinned-layers 3 --expert-cache 1M --expert-prefetch "
      "--reader uring --threads 1",
      "--max-pinned-layers 2 --expert-prefetch --expert-prefetch-extra 3 "
      "--threads 2",
  };
  std::set<int> pinned_seen;
  const absl::Status uring = io::testing::UringAvailable();
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::string path = (tmp_ / ("run" + std::to_string(i))).string();
    std::string flags = configs[i];
    if (const size_t at = flags.find("--reader uring");
        at != std::string::npos && !uring.ok()) {
      // The same checks with pread; the fallback itself has its own test.
      std::printf(
          "io_uring unavailable here (%s): running \"%s\" with "
          "--reader pread\n",
          std::string(uring.message()).c_str(), flags.c_str());
      flags.replace(at, std::string("--reader uring").size(), "--reader pread");
    }
    CommandResult r;
    const nlohmann::json out = Generate(flags, path, &r);
    ASSERT_FALSE(out.is_null()) << configs[i] << ": " << r.err;
    EXPECT_EQ(out["stats"]["mode"], "streaming") << configs[i];
    pinned_seen.insert(out["stats"]["pinned_layers"].get<int>());
    EXPECT_EQ(ReadFileBytes(path), want) << configs[i];
    // Lookahead is on unless turned off; when on, its guesses were used, so
    // the prefetch path really ran.
    const double prefetch_hits =
        out["stats"]["expert_prefetch_hits_per_token"].get<double>();
    if (configs[i].find("--expert-prefetch=false") == std::string::npos) {
      EXPECT_GT(prefetch_hits, 0.0) << configs[i];
    } else {
      EXPECT_EQ(prefetch_hits, 0.0) << configs[i];
    }
  }
  // The runs covered every layer pinned, some and none.
  EXPECT_TRUE(pinned_seen.count(0));
  EXPECT_TRUE(pinned_seen.count(5));
}

// Where io_uring is refused (a container's default seccomp profile: the
// wrapper emulates it), --reader auto falls back to the pread pool with
// identical logits, and --reader uring fails saying why.
TEST_P(StreamingTest, AutoReaderFallsBackToPreadWhereIoUringIsRefused) {
  const std::string without_uring =
      std::string(FLOTILLA_TESTS_BIN_DIR) + "/flotilla-test-without-io-uring ";
  const std::string flags =
      "--max-pinned-layers 2 --stream-vocab --expert-prefetch --threads 1";
  const std::string pread_logits = (tmp_ / "pread.f32").string();
  CommandResult r;
  ASSERT_FALSE(Generate(flags + " --reader pread", pread_logits, &r).is_null())
      << r.err;
  const std::string pread_bytes = ReadFileBytes(pread_logits);
  ASSERT_FALSE(pread_bytes.empty());

  const std::string refused_logits = (tmp_ / "refused.f32").string();
  const CommandResult probe = Run(
      without_uring + BinPath("flotilla-coordinator") + " generate --model " +
      model_ + " --ids 1,2 --max-tokens 2 --reader uring");
  EXPECT_NE(probe.code, 0) << "io_uring was not refused: " << probe.out;
  EXPECT_NE(probe.err.find("io_uring"), std::string::npos) << probe.err;

  const nlohmann::json ids_ref = testutil::LoadJson(ref_);
  std::string ids;
  for (const auto& id : ids_ref["prompt_ids"]) {
    ids += (ids.empty() ? "" : ",") + std::to_string(id.get<int>());
  }
  const CommandResult fallback =
      Run(without_uring + BinPath("flotilla-coordinator") +
          " generate --model " + model_ + " --ids " + ids + " --max-tokens " +
          std::to_string(ids_ref["n_new"].get<int>()) +
          " --json --max-context 64 --prefill-chunk 3 --dump-logits " +
          refused_logits + " --reader auto " + flags);
  // It ran where uring cannot (the probe above), so auto fell back.
  ASSERT_EQ(fallback.code, 0) << fallback.err;
  EXPECT_EQ(ReadFileBytes(refused_logits), pread_bytes);
}

TEST_P(StreamingTest, FlippedTrunkByteIsCaughtNamingLayerFileOffset) {
  const nlohmann::json m =
      testutil::LoadJson(model_ + "/flotilla-pack/manifest.json");
  uint64_t offset = 0;
  for (const auto& r : m["regions"]) {
    if (r["kind"] == "layer" && r["layer"] == 4) {
      offset = r["offset"].get<uint64_t>() + 100;
    }
  }
  ASSERT_GT(offset, 0u);
  {
    std::fstream f(model_ + "/flotilla-pack/trunk.bin",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(offset);
    char c = 0;
    f.get(c);
    f.seekp(offset);
    f.put(static_cast<char>(c ^ 0x10));
  }
  for (const char* pin : {"--max-pinned-layers 0", "--max-pinned-layers -1"}) {
    CommandResult r;
    const nlohmann::json out = Generate(pin, (tmp_ / "x.f32").string(), &r);
    EXPECT_TRUE(out.is_null());
    EXPECT_TRUE(r.exited);
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("layer 4"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("trunk.bin"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("offset"), std::string::npos) << r.err;
  }
}

// Experts are served in place from the model's shards; a damaged byte in any
// expert of layer 1 is caught before it is used.
TEST_P(StreamingTest, FlippedExpertByteIsCaughtNamingLayerExpertFileOffset) {
  // The experts are in expert_table.bin (binary records), read with the
  // pack library rather than as JSON.
  absl::StatusOr<pack::PackManifest> m =
      pack::LoadPackManifest(model_ + "/flotilla-pack");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(m->experts_in_model_dir);
  int flipped = 0;
  {
    std::fstream f(model_ + "/model.safetensors",
                   std::ios::in | std::ios::out | std::ios::binary);
    for (const pack::PackExpert& e : m->experts) {
      if (e.layer != 1) continue;
      const uint64_t offset = e.offset + e.length / 2;
      f.seekg(offset);
      char c = 0;
      f.get(c);
      f.seekp(offset);
      f.put(static_cast<char>(c ^ 0x01));
      ++flipped;
    }
  }
  ASSERT_GT(flipped, 0);
  CommandResult r;
  const nlohmann::json out =
      Generate("--max-pinned-layers -1", (tmp_ / "x.f32").string(), &r);
  EXPECT_TRUE(out.is_null());
  EXPECT_TRUE(r.exited);
  EXPECT_NE(r.code, 0);
  for (const char* needle :
       {"layer 1", "expert", "model.safetensors", "offset"}) {
    EXPECT_NE(r.err.find(needle), std::string::npos)
        << "stderr lacks '" << needle << "': " << r.err;
  }
}

// A pack is tied to the checkpoint it was made from.
TEST_P(StreamingTest, PackOfAnotherCheckpointIsRefused) {
  const std::string other = GetParam() == "ckpt_A" ? "ckpt_C" : "ckpt_A";
  testutil::CopyFixtureCheckpoint(other, model_);
  const CommandResult r =
      Run(BinPath("flotilla-coordinator") + " generate --model " + model_ +
          " --ids 1,2 --max-tokens 1");
  EXPECT_TRUE(r.exited);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("was made from checkpoint"), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, StreamingTest,
                         ::testing::Values("ckpt_A", "ckpt_C"));

}  // namespace
}  // namespace flotilla
