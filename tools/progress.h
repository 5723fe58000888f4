// A byte-progress meter for long tool runs (pack, verify): bytes done/total,
// rate and ETA on stderr. On a terminal one line is redrawn at most 4 times
// a second; otherwise (logs, CI) a plain line is printed every
// `plain_interval_s` so logs stay short.
//
// Thread-safe: Add() may be called from any thread; a ticker thread prints.
#ifndef FLOTILLA_TOOLS_PROGRESS_H_
#define FLOTILLA_TOOLS_PROGRESS_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace flotilla::tools {

class ProgressMeter {
 public:
  // `out` null disables output. `already_done` bytes (from a resumed run)
  // count towards done/total but not towards the rate.
  ProgressMeter(std::string label, uint64_t total_bytes, uint64_t already_done,
                FILE* out, double plain_interval_s = 10.0);
  ~ProgressMeter();  // Finish()es
  ProgressMeter(const ProgressMeter&) = delete;
  ProgressMeter& operator=(const ProgressMeter&) = delete;

  void Add(uint64_t bytes) {
    done_.fetch_add(bytes, std::memory_order_relaxed);
  }

  // Stops the ticker and prints the final line (once).
  void Finish();

  uint64_t done() const { return done_.load(std::memory_order_relaxed); }
  // Bytes per second over this run (excluding `already_done`).
  double rate() const;
  double seconds() const;

  // "12.30 GB / 1.56 TB (0.8%)  2.10 GB/s  ETA 12m03s" (exposed for tests).
  static std::string Line(const std::string& label, uint64_t done,
                          uint64_t total, double rate_bytes_per_s);

 private:
  void Tick();
  void Print(bool final);

  const std::string label_;
  const uint64_t total_;
  const uint64_t initial_;
  FILE* const out_;
  const bool tty_;
  const double plain_interval_s_;
  const std::chrono::steady_clock::time_point start_;
  std::atomic<uint64_t> done_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  bool finished_ = false;
  std::thread ticker_;
};

}  // namespace flotilla::tools

#endif  // FLOTILLA_TOOLS_PROGRESS_H_
