#include "shared/io/memory_budget.h"

#include <malloc.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "shared/base/check.h"
#include "shared/base/status_macros.h"

namespace flotilla::io {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

absl::Status BadSize(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "bad byte size \"", text, "\": ", why,
      " (expected e.g. 8G, 512M, 1.5G, 123456; K/M/G/T are powers of 1024)"));
}

// Reads "Key:   123 kB" from a /proc status-style file, in bytes.
absl::StatusOr<uint64_t> ReadKbField(const char* path, absl::string_view key) {
  std::ifstream in(path);
  if (!in) return absl::UnavailableError(absl::StrCat("cannot read ", path));
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view rest(line);
    if (!absl::ConsumePrefix(&rest, key) || !absl::ConsumePrefix(&rest, ":")) {
      continue;
    }
    rest = absl::StripAsciiWhitespace(rest);
    const bool kb = absl::ConsumeSuffix(&rest, "kB");
    uint64_t v = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &v)) break;
    return kb ? v * 1024 : v;
  }
  return absl::NotFoundError(absl::StrCat("no \"", key, "\" in ", path));
}

// The memory limit of this process's cgroup (v1 or v2), if any. A run under
// a cgroup emulating a small machine sees the host's numbers in
// /proc/meminfo, so "auto" and "max" would otherwise overshoot.
std::optional<uint64_t> CgroupLimitBytes(uint64_t* usage_bytes) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> parts =
        absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() != 3) continue;
    std::string limit_file, usage_file;
    if (parts[1] == "memory") {
      const std::string dir = "/sys/fs/cgroup/memory" + parts[2];
      limit_file = dir + "/memory.limit_in_bytes";
      usage_file = dir + "/memory.usage_in_bytes";
    } else if (parts[0] == "0" && parts[1].empty()) {
      const std::string dir = "/sys/fs/cgroup" + parts[2];
      limit_file = dir + "/memory.max";
      usage_file = dir + "/memory.current";
    } else {
      continue;
    }
    std::ifstream lf(limit_file);
    std::string text;
    uint64_t limit = 0;
    if (!(lf >> text) || !absl::SimpleAtoi(text, &limit)) continue;  // "max"
    if (limit >= (1ull << 60)) continue;  // v1's "unlimited" sentinel.
    std::ifstream uf(usage_file);
    uint64_t usage = 0;
    if (uf >> usage) *usage_bytes = usage;
    return limit;
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  size_t i = 0;
  while (i < s.size() && absl::ascii_isdigit(s[i])) ++i;
  const absl::string_view int_part = s.substr(0, i);
  absl::string_view frac_part;
  if (i < s.size() && s[i] == '.') {
    const size_t start = ++i;
    while (i < s.size() && absl::ascii_isdigit(s[i])) ++i;
    frac_part = s.substr(start, i - start);
    if (frac_part.empty()) return BadSize(text, "no digits after '.'");
  }
  if (int_part.empty() && frac_part.empty()) {
    return BadSize(text, "no number");
  }
  const std::string unit =
      absl::AsciiStrToLower(absl::StripLeadingAsciiWhitespace(s.substr(i)));
  uint64_t mult = 1;
  absl::string_view suffix = unit;
  if (!suffix.empty() && suffix != "b") {
    const char* kUnits = "kmgt";
    const char* u = std::strchr(kUnits, suffix[0]);
    if (u == nullptr) return BadSize(text, "unknown unit");
    mult = 1ull << (10 * (u - kUnits + 1));
    suffix.remove_prefix(1);
    if (!suffix.empty() && suffix != "b" && suffix != "ib") {
      return BadSize(text, "unknown unit");
    }
  }
  if (!frac_part.empty() && mult == 1) {
    return BadSize(text, "fractional bytes");
  }
  uint64_t whole = 0;
  if (!int_part.empty() && !absl::SimpleAtoi(int_part, &whole)) {
    return absl::OutOfRangeError(
        absl::StrCat("byte size \"", text, "\" is too large"));
  }
  if (whole > std::numeric_limits<uint64_t>::max() / mult) {
    return absl::OutOfRangeError(
        absl::StrCat("byte size \"", text, "\" is too large"));
  }
  uint64_t bytes = whole * mult;
  if (!frac_part.empty()) {
    // Digits past ~18 cannot matter for a multiplier <= 2^40.
    double frac = 0;
    const std::string digits(frac_part.substr(0, 18));
    if (!absl::SimpleAtod(absl::StrCat("0.", digits), &frac)) {
      return BadSize(text, "bad fraction");
    }
    const uint64_t extra = static_cast<uint64_t>(std::floor(frac * mult));
    if (bytes > std::numeric_limits<uint64_t>::max() - extra) {
      return absl::OutOfRangeError(
          absl::StrCat("byte size \"", text, "\" is too large"));
    }
    bytes += extra;
  }
  return bytes;
}

absl::StatusOr<uint64_t> ReadMeminfoBytes(absl::string_view key) {
  return ReadKbField("/proc/meminfo", key);
}

absl::StatusOr<uint64_t> ResolveBudget(absl::string_view spec) {
  const std::string s = absl::AsciiStrToLower(absl::StripAsciiWhitespace(spec));
  if (s == "laptop") return 8 * kGiB;
  if (s == "desktop") return 32 * kGiB;
  if (s == "workstation") return 96 * kGiB;
  if (s == "server") return 128 * kGiB;
  if (s == "max" || s == "auto") {
    FLOTILLA_ASSIGN_OR_RETURN(
        uint64_t bytes,
        ReadMeminfoBytes(s == "max" ? "MemTotal" : "MemAvailable"));
    uint64_t cg_usage = 0;
    if (std::optional<uint64_t> limit = CgroupLimitBytes(&cg_usage)) {
      const uint64_t cg_bytes =
          s == "max" ? *limit : (*limit > cg_usage ? *limit - cg_usage : 0);
      bytes = std::min(bytes, cg_bytes);
    }
    // "auto" keeps 10% back for the page cache, the allocator's slack and
    // whatever else the machine is running.
    if (s == "auto") bytes -= bytes / 10;
    return bytes;
  }
  auto parsed = ParseByteSize(spec);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad memory budget \"", spec,
        "\": expected laptop, desktop, workstation, server, max, auto or a "
        "size like 8G (",
        parsed.status().message(), ")"));
  }
  return parsed;
}

absl::Status MemoryAccountant::Charge(const std::string& owner,
                                      uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > budget_ || used_ > budget_ - bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "memory budget exceeded: \"", owner, "\" asked for ",
        FormatBytesBinary(bytes), " (", bytes, " bytes) but ",
        FormatBytesBinary(used_), " of the ", FormatBytesBinary(budget_),
        " budget is in use (", FormatBytesBinary(budget_ - used_),
        " free); raise --mem or shrink the plan"));
  }
  used_ += bytes;
  peak_ = std::max(peak_, used_);
  by_owner_[owner] += bytes;
  return absl::OkStatus();
}

void MemoryAccountant::Release(const std::string& owner, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_owner_.find(owner);
  FLOTILLA_CHECK(it != by_owner_.end() && it->second >= bytes);
  it->second -= bytes;
  used_ -= bytes;
  if (it->second == 0) by_owner_.erase(it);
}

uint64_t MemoryAccountant::used() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

uint64_t MemoryAccountant::peak() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

uint64_t MemoryAccountant::available() const {
  std::lock_guard<std::mutex> lock(mu_);
  return budget_ - used_;
}

uint64_t MemoryAccountant::owner_bytes(const std::string& owner) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_owner_.find(owner);
  return it == by_owner_.end() ? 0 : it->second;
}

std::map<std::string, uint64_t> MemoryAccountant::owners() const {
  std::lock_guard<std::mutex> lock(mu_);
  return by_owner_;
}

std::string MemoryAccountant::Report() const {
  std::lock_guard<std::mutex> lock(mu_);
  constexpr double kMiB = 1024.0 * 1024.0;
  const double budget = budget_ > 0 ? static_cast<double>(budget_) : 1.0;
  std::string out =
      absl::StrFormat("%-32s %12s %9s\n", "owner", "MiB", "% budget");
  for (const auto& [owner, bytes] : by_owner_) {
    absl::StrAppendFormat(&out, "%-32s %12.1f %8.1f%%\n", owner, bytes / kMiB,
                          100.0 * bytes / budget);
  }
  absl::StrAppendFormat(&out, "%-32s %12.1f %8.1f%%\n", "used", used_ / kMiB,
                        100.0 * used_ / budget);
  absl::StrAppendFormat(&out, "%-32s %12.1f %8.1f%%\n", "peak", peak_ / kMiB,
                        100.0 * peak_ / budget);
  absl::StrAppendFormat(&out, "%-32s %12.1f\n", "budget", budget_ / kMiB);
  return out;
}

uint64_t PeakRssBytes() {
  return ReadKbField("/proc/self/status", "VmHWM").value_or(0);
}

uint64_t CurrentRssBytes() {
  return ReadKbField("/proc/self/status", "VmRSS").value_or(0);
}

uint64_t TrimmedRssBytes() {
  malloc_trim(0);
  return CurrentRssBytes();
}

namespace {

std::string FormatScaled(uint64_t bytes, double base, const char* const* units,
                         int n_units) {
  if (bytes < base) return absl::StrCat(bytes, " B");
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= base && u + 1 < n_units) {
    v /= base;
    ++u;
  }
  return absl::StrFormat("%.2f %s", v, units[u]);
}

}  // namespace

std::string FormatBytes(uint64_t bytes) {
  static const char* const kUnits[] = {"kB", "MB", "GB", "TB", "PB"};
  return FormatScaled(bytes, 1000.0, kUnits, 5);
}

std::string FormatBytesBinary(uint64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  return FormatScaled(bytes, 1024.0, kUnits, 5);
}

}  // namespace flotilla::io
