// A worker serving another checkpoint is refused at connect with a message
// naming both fingerprints, in the library and in the CLI; so is a fleet
// that does not hold every expert.
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/experts/expert_index.h"
#include "shared/model/checkpoint_fingerprint.h"
#include "shared/model/safetensors.h"
#include "tests/distributed_test_util.h"

namespace flotilla::dtest {
namespace {

using ::testing::HasSubstr;

std::string FingerprintOf(const std::string& dir) {
  auto source = model::SafetensorsCheckpoint::OpenDir(dir);
  EXPECT_TRUE(source.ok()) << source.status();
  auto fp = model::FingerprintCheckpoint(dir, **source);
  EXPECT_TRUE(fp.ok()) << fp.status();
  return fp.ok() ? *fp : "";
}

// A worker on `mine` (shard 0/2) and one on `other` (1/2): opening `mine`
// through them is refused, naming the foreign worker and both
// fingerprints. The workers stay up in `fleet` for the caller.
struct MixedFleet {
  std::unique_ptr<WorkerProcess> good, bad;
};

void ExpectForeignWorkerRefused(const std::string& mine,
                                const std::string& other,
                                const std::string& logs, MixedFleet* fleet) {
  const std::string fp_mine = FingerprintOf(mine);
  const std::string fp_theirs = FingerprintOf(other);
  ASSERT_NE(fp_mine, fp_theirs);
  auto good = WorkerProcess::Start(
      {"--model=" + mine, "--shard=0/2", "--threads=1", "--mem=256M"},
      logs + "/good.log");
  ASSERT_TRUE(good.ok()) << good.status();
  auto bad = WorkerProcess::Start(
      {"--model=" + other, "--shard=1/2", "--threads=1", "--mem=256M"},
      logs + "/bad.log");
  ASSERT_TRUE(bad.ok()) << bad.status();
  fleet->good = *std::move(good);
  fleet->bad = *std::move(bad);
  coordinator::RemoteExpertsOptions options;
  options.workers = {fleet->good->address(), fleet->bad->address()};
  auto model = OpenRemoteModel(mine, options);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(model.status().message());
  EXPECT_THAT(message, HasSubstr(fleet->bad->address()));
  EXPECT_THAT(message, HasSubstr(fp_mine));
  EXPECT_THAT(message, HasSubstr(fp_theirs));
  EXPECT_THAT(message, HasSubstr("refusing"));
}

TEST(FingerprintTest, WorkerOnAnotherCheckpointIsRefused) {
  TempDir dir;
  // Same shapes as ckpt_A (k3-tiny), other weights: only the fingerprint
  // tells them apart.
  const std::string other = dir.path() + "/other";
  ASSERT_TRUE(Synth(other, 99).ok());
  const std::string mine = FingerprintOf(CkptA());
  const std::string theirs = FingerprintOf(other);
  ASSERT_NE(mine, theirs);

  MixedFleet fleet;
  ASSERT_NO_FATAL_FAILURE(
      ExpectForeignWorkerRefused(CkptA(), other, dir.path(), &fleet));
  coordinator::RemoteExpertsOptions options;
  options.workers = {fleet.good->address(), fleet.bad->address()};

  std::string out;
  const int code = RunCommand(
      absl::StrCat(BinPath("flotilla-coordinator"), " generate --model ",
                   CkptA(), " --ids 3,7 --max-tokens 2 --workers ",
                   absl::StrJoin(options.workers, ",")),
      &out);
  EXPECT_EQ(code, 1) << out;
  EXPECT_THAT(out, HasSubstr(mine));
  EXPECT_THAT(out, HasSubstr(theirs));
}

TEST(FingerprintTest, FleetMissingExpertsIsRefused) {
  TempDir dir;
  // Worker 0 of 2 alone holds half the experts.
  auto only = WorkerProcess::Start(
      {"--model=" + CkptA(), "--shard=0/2", "--threads=1", "--mem=256M"},
      dir.path() + "/only.log");
  ASSERT_TRUE(only.ok()) << only.status();
  coordinator::RemoteExpertsOptions options;
  options.workers = {(*only)->address()};
  auto model = OpenRemoteModel(CkptA(), options);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(std::string(model.status().message()),
              HasSubstr("do not hold every expert"));
}

// Two synth checkpoints of one layout, seeds 1 and 2: the fingerprint's
// data samples tell them apart (metadata alone did not), so a worker on
// the other one is refused.
TEST(FingerprintTest, AnotherSeedOfTheSameLayoutIsRefused) {
  TempDir dir;
  const std::string one = dir.path() + "/seed1", two = dir.path() + "/seed2";
  ASSERT_TRUE(Synth(one, 1).ok());
  ASSERT_TRUE(Synth(two, 2).ok());
  MixedFleet fleet;
  ASSERT_NO_FATAL_FAILURE(
      ExpectForeignWorkerRefused(one, two, dir.path(), &fleet));
}

// Other weights that the fingerprint's samples miss: one byte of one
// expert changed in a copy, the copy packed in place. Its worker reports
// the pack's per-expert checksums in Info; the coordinator, with its own
// in-place pack of the original, compares them and refuses the worker,
// naming the expert and both checksums. On the clean copy it generates.
TEST(FingerprintTest, OtherWeightsUnderAnEqualFingerprintAreRefused) {
  namespace fs = std::filesystem;
  TempDir dir;
  const std::string mine = dir.path() + "/mine", other = dir.path() + "/other";
  fs::copy(CkptA(), mine, fs::copy_options::recursive);
  fs::copy(CkptA(), other, fs::copy_options::recursive);
  auto source = model::SafetensorsCheckpoint::OpenDir(other);
  ASSERT_TRUE(source.ok()) << source.status();
  auto index = experts::ExpertIndex::FromTensorSource(**source, {});
  ASSERT_TRUE(index.ok()) << index.status();
  const std::string fp = FingerprintOf(mine);
  // An expert of worker 1's (rotate-v1, N = 2: (layer + expert) odd) whose
  // middle byte the fingerprint does not sample.
  int layer = -1, expert = -1;
  for (const experts::ExpertKey& key : index->Keys()) {
    if ((key.layer + key.expert) % 2 == 0) continue;
    const experts::ExpertLocation& loc = *index->Find(key);
    const std::string file = index->files()[loc.file];
    const uint64_t at = loc.offset + loc.length / 2;
    ASSERT_TRUE(XorByte(file, at, 0x01).ok());
    if (FingerprintOf(other) == fp) {
      layer = key.layer;
      expert = key.expert;
      break;
    }
    ASSERT_TRUE(XorByte(file, at, 0x01).ok());  // sampled: put it back
  }
  ASSERT_GE(layer, 0) << "every expert's middle byte is sampled";
  std::string output;
  for (const std::string& d : {mine, other}) {
    ASSERT_EQ(RunCommand(absl::StrCat(BinPath("flotilla-tool"),
                                      " pack --model ", d, " 2>&1"),
                         &output),
              0)
        << output;
  }
  auto good = WorkerProcess::Start(
      {"--model=" + mine, "--shard=0/2", "--threads=1", "--mem=256M"},
      dir.path() + "/good.log");
  ASSERT_TRUE(good.ok()) << good.status();
  auto bad = WorkerProcess::Start(
      {"--model=" + other, "--shard=1/2", "--threads=1", "--mem=256M"},
      dir.path() + "/bad.log");
  ASSERT_TRUE(bad.ok()) << bad.status();
  EXPECT_THAT((*bad)->Log(), HasSubstr("model fingerprint " + fp));
  const std::string generate =
      absl::StrCat(BinPath("flotilla-coordinator"), " generate --model ", mine,
                   " --ids 1,2 --max-tokens 2 --workers ");
  const int code = RunCommand(absl::StrCat(generate, (*good)->address(), ",",
                                           (*bad)->address(), " 2>&1"),
                              &output);
  EXPECT_EQ(code, 1) << output;
  EXPECT_THAT(output,
              HasSubstr(absl::StrCat("serves layer ", layer, " expert ", expert,
                                     " with content checksum")));
  EXPECT_THAT(output, HasSubstr((*bad)->address()));
  EXPECT_THAT(output, HasSubstr("other weights under the same layout"));
  // The same fleet with worker 1 on the clean copy generates.
  (*bad)->Signal(SIGKILL);
  auto clean = WorkerProcess::Start(
      {"--model=" + mine, "--shard=1/2", "--threads=1", "--mem=256M"},
      dir.path() + "/clean.log");
  ASSERT_TRUE(clean.ok()) << clean.status();
  EXPECT_EQ(RunCommand(absl::StrCat(generate, (*good)->address(), ",",
                                    (*clean)->address(), " 2>&1"),
                       &output),
            0)
      << output;
}

TEST(FingerprintTest, UnreachableWorkerIsNamed) {
  coordinator::RemoteExpertsOptions options;
  options.workers = {"127.0.0.1:1"};  // nothing listens on port 1
  options.connect_timeout_ms = 500;
  auto model = OpenRemoteModel(CkptA(), options);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("127.0.0.1:1"));
}

}  // namespace
}  // namespace flotilla::dtest
