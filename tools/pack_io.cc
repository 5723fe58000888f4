#include "tools/pack_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/io/checksum.h"
#include "shared/pack/expert_table.h"

namespace flotilla::tools {
namespace {

// Large enough that syscall overhead vanishes, small enough that one write
// does not hold up a progress tick for long.
constexpr uint64_t kWriteChunk = uint64_t{64} << 20;

absl::Status Errno(int err, const std::string& what) {
  return absl::Status(absl::ErrnoToStatusCode(err),
                      absl::StrCat(what, ": ", std::strerror(err)));
}

}  // namespace

OutFile::~OutFile() {
  if (fd_ >= 0) ::close(fd_);
}

OutFile::OutFile(OutFile&& other) noexcept
    : fd_(other.fd_), direct_(other.direct_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

OutFile& OutFile::operator=(OutFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    direct_ = other.direct_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

absl::StatusOr<OutFile> OutFile::Open(const std::string& path, uint64_t size,
                                      bool truncate) {
  OutFile f;
  f.path_ = path;
  const int flags = O_RDWR | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : 0);
  f.fd_ = ::open(path.c_str(), flags | O_DIRECT, 0644);
  f.direct_ = f.fd_ >= 0;
  if (f.fd_ < 0 && errno == EINVAL) f.fd_ = ::open(path.c_str(), flags, 0644);
  if (f.fd_ < 0) return Errno(errno, absl::StrCat("cannot open ", path));
  if (::ftruncate(f.fd_, static_cast<off_t>(size)) != 0) {
    return Errno(errno,
                 absl::StrCat("cannot size ", path, " to ", size, " bytes"));
  }
  return f;
}

absl::Status OutFile::Write(const uint8_t* data, uint64_t length,
                            uint64_t offset) const {
  uint64_t done = 0;
  while (done < length) {
    const size_t want = std::min(kWriteChunk, length - done);
    const ssize_t got =
        ::pwrite(fd_, data + done, want, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      return Errno(got < 0 ? errno : EIO,
                   absl::StrCat("write of ", want, " bytes at offset ",
                                offset + done, " of ", path_, " failed"));
    }
    done += static_cast<uint64_t>(got);
  }
  return absl::OkStatus();
}

absl::Status OutFile::Sync() const {
  if (::fdatasync(fd_) != 0) {
    return Errno(errno, absl::StrCat("fdatasync of ", path_));
  }
  return absl::OkStatus();
}

bool PathExists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

absl::Status RemoveFile(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot remove ", path, ": ", ec.message()));
  }
  return absl::OkStatus();
}

absl::Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno(errno, absl::StrCat("cannot open dir ", dir));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return Errno(err, absl::StrCat("fsync of dir ", dir));
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view data) {
  const std::string tmp = path + ".tmp";
  const int fd =
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno(errno, absl::StrCat("cannot create ", tmp));
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t got = ::write(fd, data.data() + done, data.size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      const int err = got < 0 ? errno : EIO;
      ::close(fd);
      return Errno(err, absl::StrCat("write to ", tmp));
    }
    done += static_cast<size_t>(got);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return Errno(err, absl::StrCat("fsync of ", tmp));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return Errno(errno, absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return SyncDir(std::filesystem::path(path).parent_path().string());
}

absl::Status WritePackManifest(const std::string& dir,
                               const pack::PackManifest& manifest) {
  const pack::EncodedPackManifest files = pack::EncodePackManifest(manifest);
  FLOTILLA_RETURN_IF_ERROR(WriteFileAtomically(
      dir + "/" + pack::kExpertTableFile, files.expert_table));
  return WriteFileAtomically(dir + "/manifest.json", files.json);
}

std::vector<RunBatch> MakeRunBatches(const std::vector<FileRun>& runs,
                                     uint64_t max_bytes, uint64_t max_gap) {
  std::vector<RunBatch> batches;
  for (size_t i = 0; i < runs.size(); ++i) {
    const FileRun& r = runs[i];
    if (!batches.empty()) {
      RunBatch& b = batches.back();
      const uint64_t end = b.span_offset + b.span_length;
      if (r.file == b.file && r.offset >= end && r.offset - end <= max_gap &&
          r.offset + r.length - b.span_offset <= max_bytes) {
        b.end = i + 1;
        b.span_length = r.offset + r.length - b.span_offset;
        continue;
      }
    }
    batches.push_back({i, i + 1, r.file, r.offset, r.length});
  }
  return batches;
}

uint64_t BatchBufferBytes(const RunBatch& batch) {
  return io::AlignForDirectIo(batch.span_offset, batch.span_length).length;
}

absl::StatusOr<std::vector<const uint8_t*>> ReadRunBatch(
    const io::File& file, const std::vector<FileRun>& runs,
    const RunBatch& batch, io::AlignedBuffer* buffer) {
  const io::AlignedRange range =
      io::AlignForDirectIo(batch.span_offset, batch.span_length);
  if (batch.span_offset + batch.span_length > file.size()) {
    return absl::OutOfRangeError(absl::StrCat(
        file.path(), " is ", file.size(), " bytes; runs need up to byte ",
        batch.span_offset + batch.span_length));
  }
  if (buffer->size() < range.length) {
    FLOTILLA_ASSIGN_OR_RETURN(
        *buffer, io::AlignedBuffer::Allocate(range.length, /*prefault=*/false));
  }
  FLOTILLA_RETURN_IF_ERROR(
      file.ReadAt(range.offset, range.length, buffer->data()));
  std::vector<const uint8_t*> starts;
  for (size_t i = batch.begin; i < batch.end; ++i) {
    starts.push_back(buffer->data() + (runs[i].offset - range.offset));
  }
  return starts;
}

absl::Status StreamFileRange(
    const io::File& file, uint64_t offset, uint64_t length,
    io::AlignedBuffer* buffer,
    const std::function<void(const uint8_t*, uint64_t, uint64_t)>& visit) {
  if (offset + length > file.size()) {
    return absl::OutOfRangeError(absl::StrCat(file.path(), " is ", file.size(),
                                              " bytes; expected at least ",
                                              offset + length));
  }
  // One block of slack: an unaligned start widens the read by up to 4 KiB.
  const uint64_t need = kWriteChunk + io::kDirectIoAlignment;
  if (buffer->size() < need) {
    FLOTILLA_ASSIGN_OR_RETURN(
        *buffer, io::AlignedBuffer::Allocate(need, /*prefault=*/false));
  }
  uint64_t done = 0;
  while (done < length) {
    const uint64_t want = std::min(kWriteChunk, length - done);
    const io::AlignedRange r = io::AlignForDirectIo(offset + done, want);
    FLOTILLA_RETURN_IF_ERROR(file.ReadAt(r.offset, r.length, buffer->data()));
    visit(buffer->data() + r.skip, done, want);
    done += want;
  }
  return absl::OkStatus();
}

void RunParallel(size_t n, int threads,
                 const std::function<void(size_t i, int worker)>& fn,
                 const std::atomic<bool>* stop) {
  std::atomic<size_t> next{0};
  auto work = [&](int worker) {
    while (!stop->load()) {
      const size_t i = next.fetch_add(1);
      if (i >= n) return;
      fn(i, worker);
    }
  };
  std::vector<std::thread> pool;
  for (int w = 1; w < threads; ++w) pool.emplace_back(work, w);
  work(0);
  for (std::thread& t : pool) t.join();
}

}  // namespace flotilla::tools
