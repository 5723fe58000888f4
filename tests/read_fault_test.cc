// A read fault in the middle of a generation (EIO, a short read nobody
// noticed, a flipped byte) ends that generation with an error naming the
// file and the offset: never a hang, a crash or wrong output. A slow read
// changes nothing. And the next generation in the same process, once the
// disk behaves, gives the same bits as before. The faults come from
// shared/testing/faulty_reader.h, installed through
// EngineOptions::reader_factory: the engine's own code paths run.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/engine.h"
#include "coordinator/generate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/testing/experts_test_util.h"
#include "shared/testing/faulty_reader.h"
#include "shared/testing/fixture.h"
#include "shared/testing/process.h"

namespace flotilla::coordinator {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testutil::Fault;
using testutil::FaultKind;

const std::vector<int32_t> kPrompt = {3, 7, 11, 5};
constexpr int kTokens = 8;

class ReadFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testutil::CopyFixtureCheckpoint("ckpt_A", dir_.path());
    const testutil::CommandResult pack = testutil::RunCommand(
        testutil::BinPath("flotilla-tool") + " pack --model " + dir_.path(),
        dir_.path());
    ASSERT_EQ(pack.code, 0) << pack.err;
    EngineOptions o;
    o.model_dir = dir_.path();
    o.mem = "1G";
    o.threads = 1;
    o.max_pinned_layers = 2;  // the other 11 layers stream every token
    o.stream_vocab = true;    // and so do the embedding rows and lm_head
    o.expert_prefetch = true;
    o.reader = "pread";
    o.reader_factory = testutil::FaultyReaderFactory(plan_);
    auto engine = OpenEngine(o);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    ASSERT_TRUE(engine_->streaming);
    auto want = Run();
    ASSERT_TRUE(want.ok()) << want.status();
    want_ = *std::move(want);
  }

  absl::StatusOr<GenerateResult> Run() {
    GenerateOptions g;
    g.max_tokens = kTokens;
    g.keep_logits = true;
    return Generate(*engine_->model, kPrompt, g, nullptr);
  }

  // Reads of files named `path_contains` in one clean generation.
  int64_t CountReads(const std::string& path_contains) {
    Fault count;
    count.kind = FaultKind::kEio;
    count.path_contains = path_contains;
    count.count = 0;  // counts matching reads, hits none
    plan_->Set(count);
    EXPECT_TRUE(Run().ok());
    const int64_t n = plan_->seen();
    plan_->Clear();
    return n;
  }

  // Hits the read half-way through a generation's reads of `file`: the
  // generation fails naming the file and an offset, and after the disk is
  // healed the next one matches the first bit for bit.
  void ExpectFailsThenRecovers(FaultKind kind, const std::string& file,
                               const std::string& what) {
    SCOPED_TRACE(what + " on " + file);
    const int64_t reads = CountReads(file);
    ASSERT_GT(reads, 4) << "the test must read " << file << " every token";
    Fault f;
    f.kind = kind;
    f.path_contains = file;
    f.skip = reads / 2;
    plan_->Set(f);
    const absl::StatusOr<GenerateResult> broken = Run();
    EXPECT_EQ(plan_->hits(), 1);
    ASSERT_FALSE(broken.ok()) << "a " << what << " went unnoticed";
    std::printf("%s on %s -> %s\n", what.c_str(), file.c_str(),
                broken.status().ToString().c_str());
    EXPECT_THAT(std::string(broken.status().message()),
                AllOf(HasSubstr(file), HasSubstr("offset"), HasSubstr(what)));
    plan_->Clear();
    const absl::StatusOr<GenerateResult> again = Run();
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->generated_ids, want_.generated_ids);
    EXPECT_TRUE(again->logits == want_.logits)
        << "max diff " << testutil::MaxAbsDiff(again->logits, want_.logits);
  }

  experts::testing::TempDir dir_;
  std::shared_ptr<testutil::FaultPlan> plan_ =
      std::make_shared<testutil::FaultPlan>();
  std::unique_ptr<Engine> engine_;
  GenerateResult want_;
};

TEST_F(ReadFaultTest, TrunkFaultsEndTheGenerationNamingFileAndOffset) {
  ExpectFailsThenRecovers(FaultKind::kEio, "trunk.bin", "Input/output error");
  ExpectFailsThenRecovers(FaultKind::kFlipByte, "trunk.bin",
                          "checksum mismatch");
  ExpectFailsThenRecovers(FaultKind::kShortRead, "trunk.bin",
                          "checksum mismatch");
}

TEST_F(ReadFaultTest, ExpertFaultsEndTheGenerationNamingFileAndOffset) {
  ExpectFailsThenRecovers(FaultKind::kEio, "model.safetensors",
                          "Input/output error");
  ExpectFailsThenRecovers(FaultKind::kFlipByte, "model.safetensors",
                          "checksum mismatch");
  ExpectFailsThenRecovers(FaultKind::kShortRead, "model.safetensors",
                          "checksum mismatch");
}

TEST_F(ReadFaultTest, SlowReadsChangeNothing) {
  Fault slow;
  slow.kind = FaultKind::kSlow;
  slow.count = -1;
  slow.slow_ms = 5;
  plan_->Set(slow);
  const absl::StatusOr<GenerateResult> got = Run();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_GT(plan_->hits(), 10);
  EXPECT_EQ(got->generated_ids, want_.generated_ids);
  EXPECT_TRUE(got->logits == want_.logits);
}

}  // namespace
}  // namespace flotilla::coordinator
