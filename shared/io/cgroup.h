// Helpers for Linux cgroup memory and blkio controllers, used by tests and
// benchmarks to emulate small machines (memory limit; the page cache counts
// against it) and slow disks (read bandwidth throttle). They need root. The
// memory controller may be cgroup v1 (/sys/fs/cgroup/memory) or the v2
// unified hierarchy (/sys/fs/cgroup, as on a stock Debian 12 machine:
// memory.max, memory.peak, memory.events); blkio is v1 only. Callers check
// *Available() first and skip otherwise.
//
// Thread-compatibility: plain filesystem calls; no shared state.
#ifndef FLOTILLA_SHARED_IO_CGROUP_H_
#define FLOTILLA_SHARED_IO_CGROUP_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace flotilla::io::cgroup {

inline constexpr char kMemoryRoot[] = "/sys/fs/cgroup/memory";
inline constexpr char kBlkioRoot[] = "/sys/fs/cgroup/blkio";

// OK when the v1 controller is mounted and we can create a child group;
// otherwise Unavailable/PermissionDenied with the reason (for GTEST_SKIP).
absl::Status MemoryAvailable();
absl::Status BlkioAvailable();

// A named child group of one controller ("memory" or "blkio"), e.g.
// /sys/fs/cgroup/memory/flotilla-test-123. Not RAII: Remove() explicitly, so
// a test can leave one behind for inspection if it wants.
struct Group {
  std::string controller;  // "memory" or "blkio".
  std::string name;        // Leaf name.
  std::string dir;         // Absolute directory.
  bool unified = false;    // in the v2 hierarchy (memory only)
};

// Tests only: where the cgroup filesystems are mounted (default
// /sys/fs/cgroup), so a fake tree of plain files can stand in for it.
void SetMountPointForTesting(const std::string& path);

// Creates (or reuses, if it exists) controller group `name`.
absl::StatusOr<Group> Create(const std::string& controller,
                             const std::string& name);
// Removes the group's directory. Fails with FailedPrecondition, listing the
// pids, while processes remain in it: we never move processes elsewhere
// ourselves, because on shared hosts the "elsewhere" (the process's original
// group) is not ours to pick. NotFound-tolerant: removing a missing group
// is OK.
absl::Status Remove(const Group& group);

// pids listed in the group's cgroup.procs.
absl::StatusOr<std::vector<pid_t>> Pids(const Group& group);

// Writes `pid` to cgroup.procs (0 means the calling process).
absl::Status MovePid(const Group& group, pid_t pid);

// Reads/writes one control file of the group, e.g. "memory.failcnt".
absl::StatusOr<std::string> ReadControl(const Group& group,
                                        const std::string& file);
absl::Status WriteControl(const Group& group, const std::string& file,
                          const std::string& value);
absl::StatusOr<uint64_t> ReadControlU64(const Group& group,
                                        const std::string& file);

// memory controller (v1 file / v2 file).
// memory.limit_in_bytes / memory.max
absl::Status SetMemoryLimit(const Group& group, uint64_t bytes);
// memory.max_usage_in_bytes / memory.peak
absl::StatusOr<uint64_t> MemoryMaxUsage(const Group& group);
// memory.usage_in_bytes / memory.current
absl::StatusOr<uint64_t> MemoryUsage(const Group& group);
// memory.failcnt / "max" of memory.events
absl::StatusOr<uint64_t> MemoryFailCount(const Group& group);
// "oom_kill" of memory.oom_control / of memory.events (0 on kernels
// without it).
absl::StatusOr<uint64_t> MemoryOomKills(const Group& group);

// blkio controller. "MAJ:MIN" of the whole disk holding `path`: st_dev ->
// /sys/dev/block/MAJ:MIN; for a partition, the parent disk's dev. Fails
// (FailedPrecondition) for paths on tmpfs/overlay with no block device.
absl::StatusOr<std::string> BlockDeviceFor(const std::string& path);
// Sets blkio.throttle.read_bps_device for the disk holding `path`
// (bytes_per_s = 0 removes the limit).
absl::Status SetReadBpsLimit(const Group& group, const std::string& path,
                             uint64_t bytes_per_s);

}  // namespace flotilla::io::cgroup

#endif  // FLOTILLA_SHARED_IO_CGROUP_H_
