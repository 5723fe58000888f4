#include "shared/io/cgroup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "shared/base/status_macros.h"

namespace flotilla::io::cgroup {
namespace {

absl::Status ErrnoError(int err, const std::string& what) {
  return absl::Status(absl::ErrnoToStatusCode(err),
                      absl::StrCat(what, ": ", std::strerror(err)));
}

// Where the cgroup filesystems are mounted; tests point it at a fake tree.
std::string& MountPoint() {
  static std::string* mount = new std::string("/sys/fs/cgroup");
  return *mount;
}

std::string RootFor(const std::string& controller) {
  return absl::StrCat(MountPoint(), "/", controller);
}

// Whether `list` (cgroup.controllers, cgroup.subtree_control: names
// separated by spaces) names `controller`.
bool ListsController(const std::string& list, const std::string& controller) {
  for (absl::string_view c :
       absl::StrSplit(list, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
    if (c == controller) return true;
  }
  return false;
}

// Control files reject partial writes, so write the whole value with one
// write(2) and report the kernel's errno (EINVAL, EBUSY...) verbatim.
absl::Status WriteFile(const std::string& path, const std::string& value) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, absl::StrCat("open ", path));
  const ssize_t n = write(fd, value.data(), value.size());
  const int err = errno;
  close(fd);
  if (n < 0) {
    return ErrnoError(err, absl::StrCat("write \"", value, "\" to ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return ErrnoError(errno, absl::StrCat("read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The v2 (unified) hierarchy holds the memory controller when the mount
// point itself lists it in cgroup.controllers (stock Debian 12: no v1).
bool UnifiedMemory() {
  auto controllers =
      ReadFile(absl::StrCat(MountPoint(), "/cgroup.controllers"));
  return controllers.ok() && ListsController(*controllers, "memory");
}

absl::Status AvailableUnified() {
  const std::string root = MountPoint();
  if (access(root.c_str(), W_OK) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create groups under ", root,
                     " (need root): ", std::strerror(errno)));
  }
  // Children get the memory files only when the parent delegates the
  // controller. Enabling it fails (EBUSY) in a cgroup that holds processes
  // itself, e.g. the root of a container's cgroup namespace.
  const std::string subtree = absl::StrCat(root, "/cgroup.subtree_control");
  auto enabled = ReadFile(subtree);
  if (enabled.ok() && ListsController(*enabled, "memory")) {
    return absl::OkStatus();
  }
  if (absl::Status s = WriteFile(subtree, "+memory"); !s.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "cgroup v2 at ", root,
        " does not delegate the memory controller to child groups: ",
        s.message()));
  }
  return absl::OkStatus();
}

absl::Status Available(const std::string& controller) {
  if (controller == "memory" && UnifiedMemory()) return AvailableUnified();
  const std::string root = RootFor(controller);
  const std::string probe = absl::StrCat(root, "/cgroup.procs");
  if (access(probe.c_str(), F_OK) != 0) {
    return absl::UnavailableError(absl::StrCat(
        "cgroup v1 ", controller, " controller not mounted at ", root,
        controller == "memory"
            ? absl::StrCat(", and no cgroup v2 memory controller at ",
                           MountPoint())
            : ""));
  }
  if (access(root.c_str(), W_OK) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create groups under ", root,
                     " (need root): ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

void SetMountPointForTesting(const std::string& path) { MountPoint() = path; }

absl::Status MemoryAvailable() { return Available("memory"); }
absl::Status BlkioAvailable() { return Available("blkio"); }

absl::StatusOr<Group> Create(const std::string& controller,
                             const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos || name[0] == '.') {
    return absl::InvalidArgumentError(
        absl::StrCat("bad cgroup name \"", name, "\""));
  }
  FLOTILLA_RETURN_IF_ERROR(Available(controller));
  const bool unified = controller == "memory" && UnifiedMemory();
  Group g{controller, name,
          absl::StrCat(unified ? MountPoint() : RootFor(controller), "/", name),
          unified};
  if (mkdir(g.dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoError(errno, absl::StrCat("mkdir ", g.dir));
  }
  return g;
}

absl::StatusOr<std::vector<pid_t>> Pids(const Group& group) {
  FLOTILLA_ASSIGN_OR_RETURN(std::string text,
                            ReadControl(group, "cgroup.procs"));
  std::vector<pid_t> pids;
  for (absl::string_view line :
       absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    int pid = 0;
    if (absl::SimpleAtoi(line, &pid)) pids.push_back(pid);
  }
  return pids;
}

absl::Status Remove(const Group& group) {
  if (rmdir(group.dir.c_str()) == 0 || errno == ENOENT) {
    return absl::OkStatus();
  }
  const int err = errno;
  if (err == EBUSY) {
    auto pids = Pids(group);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot remove ", group.dir, ": processes still in it (",
                     pids.ok() ? absl::StrJoin(*pids, " ") : "unknown", ")"));
  }
  return ErrnoError(err, absl::StrCat("rmdir ", group.dir));
}

absl::Status MovePid(const Group& group, pid_t pid) {
  return WriteControl(group, "cgroup.procs",
                      absl::StrCat(pid == 0 ? getpid() : pid));
}

absl::StatusOr<std::string> ReadControl(const Group& group,
                                        const std::string& file) {
  return ReadFile(absl::StrCat(group.dir, "/", file));
}

absl::Status WriteControl(const Group& group, const std::string& file,
                          const std::string& value) {
  return WriteFile(absl::StrCat(group.dir, "/", file), value);
}

absl::StatusOr<uint64_t> ReadControlU64(const Group& group,
                                        const std::string& file) {
  FLOTILLA_ASSIGN_OR_RETURN(std::string text, ReadControl(group, file));
  uint64_t v = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &v)) {
    return absl::DataLossError(
        absl::StrCat(group.dir, "/", file, " is not a number: \"", text, "\""));
  }
  return v;
}

namespace {

// A "key value" line of a flat-keyed file (memory.events,
// memory.oom_control); 0 when the key is absent (older kernels).
absl::StatusOr<uint64_t> KeyedValue(const Group& group, const std::string& file,
                                    absl::string_view key) {
  FLOTILLA_ASSIGN_OR_RETURN(std::string text, ReadControl(group, file));
  for (absl::string_view line :
       absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    absl::string_view rest = line;
    uint64_t v = 0;
    if (absl::ConsumePrefix(&rest, key) && absl::ConsumePrefix(&rest, " ") &&
        absl::SimpleAtoi(rest, &v)) {
      return v;
    }
  }
  return 0;
}

}  // namespace

absl::Status SetMemoryLimit(const Group& group, uint64_t bytes) {
  return WriteControl(group,
                      group.unified ? "memory.max" : "memory.limit_in_bytes",
                      absl::StrCat(bytes));
}

absl::StatusOr<uint64_t> MemoryMaxUsage(const Group& group) {
  if (group.unified) {
    // memory.peak exists from Linux 5.19 (Debian 12 runs 6.1).
    absl::StatusOr<uint64_t> peak = ReadControlU64(group, "memory.peak");
    if (!peak.ok() && absl::IsNotFound(peak.status())) {
      return absl::UnimplementedError(absl::StrCat(
          group.dir, " has no memory.peak (cgroup v2 before Linux 5.19)"));
    }
    return peak;
  }
  return ReadControlU64(group, "memory.max_usage_in_bytes");
}

absl::StatusOr<uint64_t> MemoryUsage(const Group& group) {
  return ReadControlU64(
      group, group.unified ? "memory.current" : "memory.usage_in_bytes");
}

absl::StatusOr<uint64_t> MemoryFailCount(const Group& group) {
  // v2 counts the times usage hit memory.max as "max" in memory.events.
  if (group.unified) return KeyedValue(group, "memory.events", "max");
  return ReadControlU64(group, "memory.failcnt");
}

absl::StatusOr<uint64_t> MemoryOomKills(const Group& group) {
  // Older v1 kernels do not count OOM kills (KeyedValue gives 0).
  return KeyedValue(group,
                    group.unified ? "memory.events" : "memory.oom_control",
                    "oom_kill");
}

absl::StatusOr<std::string> BlockDeviceFor(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return ErrnoError(errno, absl::StrCat("stat ", path));
  }
  const std::string dev = absl::StrCat(major(st.st_dev), ":", minor(st.st_dev));
  const std::string sys = absl::StrCat("/sys/dev/block/", dev);
  if (access(sys.c_str(), F_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " is on device ", dev,
        " which is not a block device (tmpfs/overlay?); blkio cannot "
        "throttle it"));
  }
  // A partition's sysfs node has a "partition" file and its parent
  // directory is the whole disk, whose "dev" holds MAJ:MIN. blkio throttles
  // only whole disks.
  if (access(absl::StrCat(sys, "/partition").c_str(), F_OK) == 0) {
    FLOTILLA_ASSIGN_OR_RETURN(std::string parent_dev,
                              ReadFile(absl::StrCat(sys, "/../dev")));
    return std::string(absl::StripAsciiWhitespace(parent_dev));
  }
  return dev;
}

absl::Status SetReadBpsLimit(const Group& group, const std::string& path,
                             uint64_t bytes_per_s) {
  FLOTILLA_ASSIGN_OR_RETURN(std::string dev, BlockDeviceFor(path));
  return WriteControl(group, "blkio.throttle.read_bps_device",
                      absl::StrCat(dev, " ", bytes_per_s));
}

}  // namespace flotilla::io::cgroup
