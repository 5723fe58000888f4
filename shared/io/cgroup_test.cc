#include "shared/io/cgroup.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
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
    GTEST_SKIP() << "memory cgroup unavailable: " << s;
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

// The v2 (unified) code path, on a fake cgroup2 tree of plain files: this
// machine may mount v1, a stock Debian 12 machine mounts only v2. The
// kernel would create the child's control files; here the test does.
TEST(CgroupTest, UnifiedHierarchyFiles) {
  const std::string root =
      ::testing::TempDir() + "/fake-cgroup2-" + std::to_string(getpid());
  ASSERT_EQ(system(("rm -rf " + root + " && mkdir -p " + root).c_str()), 0);
  auto write = [](const std::string& path, const std::string& text) {
    FILE* f = fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr) << path;
    fputs(text.c_str(), f);
    fclose(f);
  };
  write(root + "/cgroup.controllers", "cpuset cpu io memory pids\n");
  write(root + "/cgroup.subtree_control", "cpu memory\n");
  SetMountPointForTesting(root);
  ASSERT_TRUE(MemoryAvailable().ok()) << MemoryAvailable();
  absl::StatusOr<Group> g = Create("memory", "flotilla-fake");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->unified);
  EXPECT_EQ(g->dir, root + "/flotilla-fake");
  write(g->dir + "/memory.max", "max\n");
  ASSERT_TRUE(SetMemoryLimit(*g, 64 << 20).ok());
  EXPECT_EQ(*ReadControl(*g, "memory.max"), std::to_string(64 << 20));
  write(g->dir + "/memory.current", "1234\n");
  EXPECT_EQ(*MemoryUsage(*g), 1234u);
  // No memory.peak: a kernel before 5.19, said so.
  EXPECT_EQ(MemoryMaxUsage(*g).status().code(),
            absl::StatusCode::kUnimplemented);
  write(g->dir + "/memory.peak", "5678\n");
  EXPECT_EQ(*MemoryMaxUsage(*g), 5678u);
  write(g->dir + "/memory.events",
        "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n");
  EXPECT_EQ(*MemoryFailCount(*g), 3u);
  EXPECT_EQ(*MemoryOomKills(*g), 1u);
  // A parent that does not delegate memory (and refuses "+memory" here,
  // as a plain file takes the write: make it unwritable) is reported.
  write(root + "/cgroup.subtree_control", "cpu\n");
  chmod((root + "/cgroup.subtree_control").c_str(), 0444);
  if (geteuid() != 0) {  // root writes read-only files anyway
    EXPECT_EQ(MemoryAvailable().code(), absl::StatusCode::kUnavailable);
  }
  SetMountPointForTesting("/sys/fs/cgroup");
  ASSERT_EQ(system(("rm -rf " + root).c_str()), 0);
}

}  // namespace
}  // namespace flotilla::io::cgroup
