#include "shared/model/safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace flotilla::model {

// O_DIRECT needs buffer address, length and file offset aligned to the
// logical block size; 4 KiB covers every device we meet.
constexpr size_t kDirectAlign = 4096;

namespace {

uint64_t RoundUp(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

absl::Status ErrnoError(const std::string& what, const std::string& path,
                        int err) {
  return absl::Status(absl::ErrnoToStatusCode(err),
                      absl::StrCat(what, " ", path, ": ", std::strerror(err)));
}

}  // namespace

absl::StatusOr<ShardLayout> LayoutShard(
    const std::vector<TensorToWrite>& tensors,
    const std::vector<std::pair<std::string, std::string>>& metadata) {
  // The header lists tensors in data order, which makes a shard's layout
  // readable with `head -c`. It is assembled as text: nlohmann's
  // ordered_json inserts in linear time, quadratic over a 5,000-tensor
  // shard. json(name).dump() does the escaping (quotes, backslashes, control
  // characters; invalid UTF-8 is replaced rather than thrown on).
  auto quote = [](const std::string& s) {
    return nlohmann::json(s).dump(-1, ' ', false,
                                  nlohmann::json::error_handler_t::replace);
  };
  ShardLayout layout;
  std::string& h = layout.header;
  h = "{";
  if (!metadata.empty()) {
    nlohmann::json meta = nlohmann::json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    absl::StrAppend(
        &h, "\"__metadata__\":",
        meta.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__") {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid tensor name '", t.name, "'"));
    }
    if (!seen.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", t.name, " listed twice"));
    }
    uint64_t bytes = DTypeSize(t.dtype);
    for (int64_t d : t.shape) {
      if (d < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor ", t.name, " has a negative dimension"));
      }
      if (d != 0 && bytes > std::numeric_limits<uint64_t>::max() /
                                static_cast<uint64_t>(d)) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor ", t.name, " is too large"));
      }
      bytes *= static_cast<uint64_t>(d);
    }
    layout.begin.push_back(offset);
    layout.nbytes.push_back(bytes);
    absl::StrAppend(&h, h.size() > 1 ? "," : "", quote(t.name),
                    ":{\"dtype\":\"", DTypeName(t.dtype), "\",\"shape\":[",
                    absl::StrJoin(t.shape, ","), "],\"data_offsets\":[", offset,
                    ",", offset + bytes, "]}");
    offset += bytes;
  }
  h += "}";
  layout.data_bytes = offset;
  layout.header.append(RoundUp(layout.header.size(), 8) - layout.header.size(),
                       ' ');
  return layout;
}

absl::StatusOr<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::Create(
    const SafetensorsWriterOptions& options) {
  if (options.threads < 1 || options.buffers < 2 || options.buffer_bytes == 0 ||
      options.io_threads < 1) {
    return absl::InvalidArgumentError(
        "SafetensorsWriter needs threads >= 1, buffers >= 2, io_threads >= 1 "
        "and buffer_bytes > 0");
  }
  auto w = std::unique_ptr<SafetensorsWriter>(new SafetensorsWriter(options));
  for (int i = 0; i < options.buffers; ++i) {
    auto b = std::make_unique<Buffer>();
    b->data = static_cast<uint8_t*>(
        std::aligned_alloc(kDirectAlign, w->options_.buffer_bytes));
    if (b->data == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", w->options_.buffer_bytes, " bytes"));
    }
    w->free_.push_back(b.get());
    w->buffers_.push_back(std::move(b));
  }
  for (int i = 1; i < options.threads; ++i) {
    w->fill_threads_.emplace_back([p = w.get()] { p->FillWorker(); });
  }
  for (int i = 0; i < options.io_threads; ++i) {
    w->io_threads_.emplace_back([p = w.get()] { p->IoWorker(); });
  }
  return w;
}

SafetensorsWriter::SafetensorsWriter(const SafetensorsWriterOptions& options)
    : options_(options) {
  options_.buffer_bytes = RoundUp(options_.buffer_bytes, kDirectAlign);
}

SafetensorsWriter::~SafetensorsWriter() {
  {
    std::lock_guard<std::mutex> l(fill_mu_);
    stop_ = true;
  }
  fill_cv_.notify_all();
  for (std::thread& t : fill_threads_) t.join();
  {
    std::lock_guard<std::mutex> l(io_mu_);
    stop_io_ = true;
  }
  io_cv_.notify_all();
  for (std::thread& t : io_threads_) t.join();
  for (auto& b : buffers_) std::free(b->data);
}

void SafetensorsWriter::RunPieces() {
  const std::vector<Piece>& pieces = *pieces_;
  for (size_t i = next_piece_.fetch_add(1); i < pieces.size();
       i = next_piece_.fetch_add(1)) {
    const Piece& p = pieces[i];
    (*p.fill)(p.tensor_offset, p.size, fill_base_ + p.buffer_offset);
  }
}

void SafetensorsWriter::FillWorker() {
  uint64_t seen_epoch = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> l(fill_mu_);
      fill_cv_.wait(l, [&] { return stop_ || fill_epoch_ != seen_epoch; });
      if (stop_) return;
      seen_epoch = fill_epoch_;
    }
    RunPieces();
    std::lock_guard<std::mutex> l(fill_mu_);
    if (--fill_active_ == 0) fill_done_cv_.notify_one();
  }
}

void SafetensorsWriter::FillPieces(const std::vector<Piece>& pieces,
                                   uint8_t* base) {
  {
    std::lock_guard<std::mutex> l(fill_mu_);
    pieces_ = &pieces;
    fill_base_ = base;
    next_piece_.store(0);
    fill_active_ = static_cast<int>(fill_threads_.size());
    ++fill_epoch_;
  }
  fill_cv_.notify_all();
  RunPieces();
  std::unique_lock<std::mutex> l(fill_mu_);
  fill_done_cv_.wait(l, [&] { return fill_active_ == 0; });
}

SafetensorsWriter::Buffer* SafetensorsWriter::TakeFreeBuffer() {
  std::unique_lock<std::mutex> l(io_mu_);
  io_cv_.wait(l, [&] { return !free_.empty(); });
  Buffer* b = free_.back();
  free_.pop_back();
  return b;
}

void SafetensorsWriter::IoWorker() {
  for (;;) {
    IoJob job;
    {
      std::unique_lock<std::mutex> l(io_mu_);
      io_cv_.wait(l, [&] { return stop_io_ || !io_queue_.empty(); });
      if (io_queue_.empty()) return;
      job = io_queue_.front();
      io_queue_.pop_front();
    }
    absl::Status status = WriteJob(job);
    {
      std::lock_guard<std::mutex> l(io_mu_);
      if (!status.ok() && io_status_.ok()) io_status_ = status;
      free_.push_back(job.buffer);
    }
    io_cv_.notify_all();
  }
}

absl::Status SafetensorsWriter::WriteJob(const IoJob& job) {
  {
    std::lock_guard<std::mutex> l(io_mu_);
    if (!io_status_.ok()) return absl::OkStatus();  // shard already failed
  }
  size_t length = job.direct ? job.write_length : job.length;
  size_t done = 0;
  while (done < length) {
    ssize_t n = pwrite(job.fd, job.buffer->data + done, length - done,
                       static_cast<off_t>(job.file_offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EINVAL && job.direct) {
      // Some filesystems accept O_DIRECT at open but not the write: go on
      // buffered (the padded tail is truncated away at the end either way).
      int flags = fcntl(job.fd, F_GETFL);
      if (flags >= 0 && fcntl(job.fd, F_SETFL, flags & ~O_DIRECT) == 0) {
        direct_failed_.store(true);
        continue;
      }
    }
    if (n < 0) return ErrnoError("cannot write", current_path_, errno);
    if (n == 0) return absl::DataLossError("pwrite wrote nothing");
    done += static_cast<size_t>(n);
  }
  if (!job.direct) {
    // Push the range to disk now and drop it from the page cache, so a
    // 9 GB synthetic checkpoint does not evict everything else or pile up
    // dirty pages that stall later writes.
    sync_file_range(job.fd, static_cast<off64_t>(job.file_offset),
                    static_cast<off64_t>(job.length),
                    SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                        SYNC_FILE_RANGE_WAIT_AFTER);
    posix_fadvise(job.fd, static_cast<off_t>(job.file_offset),
                  static_cast<off_t>(job.length), POSIX_FADV_DONTNEED);
  }
  bytes_written_.fetch_add(job.length, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status SafetensorsWriter::WriteShard(
    const std::string& path, const std::vector<TensorToWrite>& tensors,
    const std::vector<std::pair<std::string, std::string>>& metadata) {
  auto layout_or = LayoutShard(tensors, metadata);
  if (!layout_or.ok()) return layout_or.status();
  const ShardLayout& layout = *layout_or;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (layout.nbytes[i] > 0 && !tensors[i].fill) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", tensors[i].name, " has no fill function"));
    }
  }
  // The first bytes of the file: the u64 header length, then the header.
  std::string prefix(8, '\0');
  uint64_t n = layout.header.size();
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>(n >> (8 * i));
  prefix += layout.header;

  bool direct = options_.direct_io;
  const int base_flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  int fd = open(path.c_str(), base_flags | (direct ? O_DIRECT : 0), 0644);
  if (fd < 0 && direct && errno == EINVAL) {  // e.g. tmpfs
    direct = false;
    fd = open(path.c_str(), base_flags, 0644);
  }
  if (fd < 0) return ErrnoError("cannot create", path, errno);
  current_path_ = path;
  direct_failed_.store(false);
  {
    std::lock_guard<std::mutex> l(io_mu_);
    io_status_ = absl::OkStatus();
  }

  const uint64_t total = layout.file_bytes();
  const uint64_t data_start = layout.data_start();
  const size_t cap = options_.buffer_bytes;
  std::vector<Piece> pieces;
  for (uint64_t off = 0; off < total; off += cap) {
    const size_t len =
        static_cast<size_t>(std::min<uint64_t>(cap, total - off));
    Buffer* buffer = TakeFreeBuffer();
    {
      std::lock_guard<std::mutex> l(io_mu_);
      if (!io_status_.ok()) {
        free_.push_back(buffer);
        break;
      }
    }
    if (off < prefix.size()) {
      std::memcpy(buffer->data, prefix.data() + off,
                  std::min<uint64_t>(len, prefix.size() - off));
    }
    // Tensors overlapping [off, off + len), cut at buffer and granule edges.
    pieces.clear();
    const uint64_t end = off + len;
    size_t t = std::upper_bound(layout.begin.begin(), layout.begin.end(),
                                off > data_start ? off - data_start : 0) -
               layout.begin.begin();
    t = t > 0 ? t - 1 : 0;
    for (; t < tensors.size(); ++t) {
      const uint64_t ts = data_start + layout.begin[t];
      const uint64_t te = ts + layout.nbytes[t];
      if (ts >= end) break;
      if (te <= off) continue;
      uint64_t p = std::max(off, ts) - ts;
      const uint64_t q = std::min(end, te) - ts;
      while (p < q) {
        const uint64_t stop =
            std::min(q, (p / kFillGranule + 1) * kFillGranule);
        pieces.push_back(
            {&tensors[t].fill, p, stop - p, static_cast<size_t>(ts + p - off)});
        p = stop;
      }
    }
    FillPieces(pieces, buffer->data);
    const size_t write_length = direct ? RoundUp(len, kDirectAlign) : len;
    std::memset(buffer->data + len, 0, write_length - len);
    {
      std::lock_guard<std::mutex> l(io_mu_);
      io_queue_.push_back({fd, buffer, off, len, write_length, direct});
    }
    io_cv_.notify_all();
  }
  absl::Status status;
  {
    std::unique_lock<std::mutex> l(io_mu_);
    io_cv_.wait(l, [&] { return free_.size() == buffers_.size(); });
    status = io_status_;
  }
  // O_DIRECT wrote whole blocks; cut the padding off the last one.
  if (status.ok() && direct && ftruncate(fd, static_cast<off_t>(total)) != 0) {
    status = ErrnoError("cannot truncate", path, errno);
  }
  if (close(fd) != 0 && status.ok()) {
    status = ErrnoError("cannot close", path, errno);
  }
  used_direct_ = direct && !direct_failed_.load();
  if (!status.ok()) unlink(path.c_str());
  return status;
}

}  // namespace flotilla::model
