#include "tools/progress.h"

#include <unistd.h>

#include <cmath>

#include "absl/strings/str_format.h"
#include "shared/io/memory_budget.h"

namespace flotilla::tools {
namespace {

using Clock = std::chrono::steady_clock;

// A terminal is redrawn at most this often: faster is flicker, not news.
constexpr auto kTtyInterval = std::chrono::milliseconds(250);

std::string Duration(double s) {
  if (!std::isfinite(s) || s < 0) return "--";
  const int64_t t = static_cast<int64_t>(s + 0.5);
  if (t >= 3600) return absl::StrFormat("%dh%02dm", t / 3600, t / 60 % 60);
  if (t >= 60) return absl::StrFormat("%dm%02ds", t / 60, t % 60);
  return absl::StrFormat("%ds", t);
}

}  // namespace

ProgressMeter::ProgressMeter(std::string label, uint64_t total_bytes,
                             uint64_t already_done, FILE* out,
                             double plain_interval_s)
    : label_(std::move(label)),
      total_(total_bytes),
      initial_(already_done),
      out_(out),
      tty_(out != nullptr && ::isatty(::fileno(out))),
      plain_interval_s_(plain_interval_s),
      start_(Clock::now()),
      done_(already_done) {
  if (out_ != nullptr) ticker_ = std::thread([this] { Tick(); });
}

ProgressMeter::~ProgressMeter() { Finish(); }

double ProgressMeter::seconds() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

double ProgressMeter::rate() const {
  const double s = seconds();
  return s > 0 ? static_cast<double>(done() - initial_) / s : 0;
}

std::string ProgressMeter::Line(const std::string& label, uint64_t done,
                                uint64_t total, double rate) {
  const double pct =
      total ? 100.0 * static_cast<double>(done) / static_cast<double>(total)
            : 100.0;
  const double eta =
      rate > 0 ? static_cast<double>(total - std::min(done, total)) / rate
               : NAN;
  return absl::StrFormat("%s: %s / %s (%.1f%%)  %s/s  ETA %s", label,
                         io::FormatBytes(done), io::FormatBytes(total), pct,
                         io::FormatBytes(static_cast<uint64_t>(rate)),
                         Duration(eta));
}

void ProgressMeter::Print(bool final) {
  const std::string line = Line(label_, done(), total_, rate());
  if (tty_) {
    // \r + erase-to-end redraws in place; the final line keeps its newline.
    std::fprintf(out_, "\r%s\x1b[K%s", line.c_str(), final ? "\n" : "");
  } else {
    std::fprintf(out_, "%s%s\n", line.c_str(),
                 final ? absl::StrFormat("  (%.1f s)", seconds()).c_str() : "");
  }
  std::fflush(out_);
}

void ProgressMeter::Tick() {
  const auto interval =
      tty_ ? Clock::duration(kTtyInterval)
           : std::chrono::duration_cast<Clock::duration>(
                 std::chrono::duration<double>(plain_interval_s_));
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, interval, [this] { return stop_; })) {
    Print(false);
  }
}

void ProgressMeter::Finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    finished_ = true;
    stop_ = true;
  }
  cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  if (out_ != nullptr) Print(true);
}

}  // namespace flotilla::tools
