#include "shared/testing/faulty_reader.h"

#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace flotilla::testutil {
namespace {

class FaultyReader final : public io::BatchReader {
 public:
  FaultyReader(std::unique_ptr<io::BatchReader> inner,
               std::shared_ptr<FaultPlan> plan)
      : inner_(std::move(inner)), plan_(std::move(plan)) {}

  absl::Status Submit(const std::vector<io::ReadRequest>& requests) override {
    // Decide before submitting, so that a refused batch counts nothing.
    std::vector<std::pair<uint64_t, Pending>> decided;
    for (const io::ReadRequest& r : requests) {
      const std::string path = r.file != nullptr ? r.file->path() : "";
      decided.push_back({r.tag, Pending{r, path, plan_->Take(path)}});
    }
    absl::Status s = inner_->Submit(requests);
    if (!s.ok()) return s;
    // Tags are the caller's and may repeat: a completion takes the oldest
    // pending decision of its tag.
    for (auto& [tag, p] : decided) pending_.emplace(tag, std::move(p));
    return absl::OkStatus();
  }

  absl::StatusOr<io::ReadCompletion> WaitOne() override {
    absl::StatusOr<io::ReadCompletion> c = inner_->WaitOne();
    if (!c.ok()) return c;
    return Apply(*std::move(c));
  }

  absl::StatusOr<std::optional<io::ReadCompletion>> PollOne() override {
    absl::StatusOr<std::optional<io::ReadCompletion>> c = inner_->PollOne();
    if (!c.ok() || !c->has_value()) return c;
    return std::optional<io::ReadCompletion>(Apply(**std::move(c)));
  }

  size_t in_flight() const override { return inner_->in_flight(); }
  const char* name() const override { return inner_->name(); }

 private:
  // The planned fault of the request `c` completes, applied to it.
  io::ReadCompletion Apply(io::ReadCompletion c) {
    auto it = pending_.lower_bound(c.tag);  // the first with this tag
    if (it == pending_.end() || it->first != c.tag) return c;
    const Pending p = std::move(it->second);
    pending_.erase(it);
    if (!c.status.ok()) return c;
    const io::ReadRequest& r = p.request;
    switch (p.fault.kind) {
      case FaultKind::kNone:
        break;
      case FaultKind::kEio:
        c.status = absl::DataLossError(
            absl::StrCat("pread ", p.path, " at offset ", r.offset, " length ",
                         r.length, ": Input/output error (injected)"));
        break;
      case FaultKind::kShortRead:
        std::memset(r.dst + r.length / 2, 0, r.length - r.length / 2);
        break;
      case FaultKind::kSlow:
        std::this_thread::sleep_for(std::chrono::milliseconds(p.fault.slow_ms));
        break;
      case FaultKind::kFlipByte:
        if (r.length > 0) r.dst[r.length / 2] ^= 0xFF;
        break;
    }
    return c;
  }

  struct Pending {
    io::ReadRequest request;
    std::string path;
    Fault fault;
  };

  std::unique_ptr<io::BatchReader> inner_;
  std::shared_ptr<FaultPlan> plan_;
  // By tag, in submission order among equal tags; one thread uses a reader.
  std::multimap<uint64_t, Pending> pending_;
};

}  // namespace

void FaultPlan::Set(const Fault& fault) {
  std::lock_guard<std::mutex> lock(mu_);
  fault_ = fault;
  seen_ = 0;
  hits_ = 0;
}

int64_t FaultPlan::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

int64_t FaultPlan::seen() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seen_;
}

Fault FaultPlan::Take(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fault_.kind == FaultKind::kNone ||
      !absl::StrContains(path, fault_.path_contains)) {
    return Fault();
  }
  const int64_t n = seen_++;
  if (n < fault_.skip) return Fault();
  if (fault_.count >= 0 && hits_ >= fault_.count) return Fault();
  ++hits_;
  return fault_;
}

namespace {

class SyncReader final : public io::BatchReader {
 public:
  absl::Status Submit(const std::vector<io::ReadRequest>& requests) override {
    for (const io::ReadRequest& r : requests) {
      done_.push_back({r.tag, r.file->ReadAt(r.offset, r.length, r.dst)});
    }
    return absl::OkStatus();
  }
  absl::StatusOr<io::ReadCompletion> WaitOne() override {
    if (done_.empty()) {
      return absl::FailedPreconditionError(
          "BatchReader::WaitOne with no reads in flight");
    }
    io::ReadCompletion c = std::move(done_.front());
    done_.pop_front();
    return c;
  }
  absl::StatusOr<std::optional<io::ReadCompletion>> PollOne() override {
    if (done_.empty()) return std::nullopt;
    return std::optional<io::ReadCompletion>(*WaitOne());
  }
  size_t in_flight() const override { return done_.size(); }
  const char* name() const override { return "sync-test"; }

 private:
  std::deque<io::ReadCompletion> done_;
};

}  // namespace

io::ReaderFactory SyncReaderFactory() {
  return [](io::ReaderKind, const io::BatchReaderOptions&)
             -> absl::StatusOr<std::unique_ptr<io::BatchReader>> {
    return std::unique_ptr<io::BatchReader>(new SyncReader());
  };
}

io::ReaderFactory FaultyReaderFactory(std::shared_ptr<FaultPlan> plan) {
  return [plan](io::ReaderKind kind, const io::BatchReaderOptions& options)
             -> absl::StatusOr<std::unique_ptr<io::BatchReader>> {
    absl::StatusOr<std::unique_ptr<io::BatchReader>> inner =
        io::CreateBatchReader(kind, options);
    if (!inner.ok()) return inner.status();
    return std::unique_ptr<io::BatchReader>(
        new FaultyReader(*std::move(inner), plan));
  };
}

}  // namespace flotilla::testutil
