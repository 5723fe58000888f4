#include "shared/io/cgroup.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flotilla::io::cgroup {
namespace {

using ::testing::HasSubstr;

std::string TestGroupName() {
  return "flotilla-io-test-" + std::to_string(getpid());
}

// A child that sleeps until killed, so we never move the test process
// itself out of the group it was started in.
pid_t SpawnSleeper() {
  const pid_t pid = fork();
  if (pid == 0) {
    pause();
    _exit(0);
  }
  return pid;
}

void Reap(pid_t pid) {
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
}

TEST(CgroupTest, MemoryGroupLifecycle) {
  if (absl::Status s = MemoryAvailable(); !s.ok()) {
    GTEST_SKIP() << "memory cgroup v1 unavailable: " << s;
  }
  auto g = Create("memory", TestGroupName());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(g->dir, HasSubstr("/sys/fs/cgroup/memory/flotilla-io-test-"));
  ASSERT_TRUE(SetMemoryLimit(*g, 256ull << 20).ok());
  auto limit = ReadControlU64(*g, "memory.limit_in_bytes");
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(*limit, 256ull << 20);

  const pid_t child = SpawnSleeper();
  ASSERT_GT(child, 0);
  absl::Status moved = MovePid(*g, child);
  EXPECT_TRUE(moved.ok()) << moved;
  auto pids = Pids(*g);
  ASSERT_TRUE(pids.ok());
  EXPECT_THAT(*pids, ::testing::Contains(child));
  // While the child lives, removal must refuse and say why.
  absl::Status busy = Remove(*g);
  EXPECT_EQ(busy.code(), absl::StatusCode::kFailedPrecondition) << busy;
  EXPECT_THAT(busy.message(), HasSubstr(std::to_string(child)));

  EXPECT_TRUE(MemoryUsage(*g).ok());
  EXPECT_TRUE(MemoryMaxUsage(*g).ok());
  auto fails = MemoryFailCount(*g);
  ASSERT_TRUE(fails.ok()) << fails.status();
  EXPECT_EQ(*fails, 0u);
  auto ooms = MemoryOomKills(*g);
  ASSERT_TRUE(ooms.ok()) << ooms.status();
  EXPECT_EQ(*ooms, 0u);

  Reap(child);
  absl::Status removed = Remove(*g);
  EXPECT_TRUE(removed.ok()) << removed;
  EXPECT_TRUE(Remove(*g).ok()) << "removing twice is fine";
}

TEST(CgroupTest, BlockDeviceOfRepoDisk) {
  auto dev = BlockDeviceFor(".");
  if (!dev.ok()) GTEST_SKIP() << "cwd not on a block device: " << dev.status();
  EXPECT_THAT(*dev, ::testing::MatchesRegex("[0-9]+:[0-9]+"));
}

TEST(CgroupTest, BlkioThrottleSetAndClear) {
  if (absl::Status s = BlkioAvailable(); !s.ok()) {
    GTEST_SKIP() << "blkio cgroup v1 unavailable: " << s;
  }
  auto dev = BlockDeviceFor(".");
  if (!dev.ok()) GTEST_SKIP() << dev.status();
  auto g = Create("blkio", TestGroupName());
  ASSERT_TRUE(g.ok()) << g.status();
  absl::Status set = SetReadBpsLimit(*g, ".", 200ull << 20);
  EXPECT_TRUE(set.ok()) << set;
  auto text = ReadControl(*g, "blkio.throttle.read_bps_device");
  ASSERT_TRUE(text.ok());
  EXPECT_THAT(*text, HasSubstr(*dev + " " + std::to_string(200ull << 20)));
  EXPECT_TRUE(SetReadBpsLimit(*g, ".", 0).ok());
  EXPECT_TRUE(Remove(*g).ok());
}

TEST(CgroupTest, BadNamesAndMissingFiles) {
  EXPECT_EQ(Create("memory", "../escape").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(Create("nonexistent-controller", "x").ok());
  Group ghost{"memory", "ghost", "/sys/fs/cgroup/memory/no-such-group-xyz"};
  EXPECT_FALSE(ReadControlU64(ghost, "memory.failcnt").ok());
}

}  // namespace
}  // namespace flotilla::io::cgroup
