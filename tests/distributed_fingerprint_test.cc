// A worker serving another checkpoint is refused at connect with a message
// naming both fingerprints, in the library and in the CLI; so is a fleet
// that does not hold every expert.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
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
