// VerifyPack (declared in pack.h): re-reads a finished pack and checks
// every checksum of its manifest.
#include <cinttypes>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "shared/base/status_macros.h"
#include "shared/io/checksum.h"
#include "shared/model/checkpoint_fingerprint.h"
#include "shared/model/pack_manifest.h"
#include "shared/model/safetensors.h"
#include "tools/pack.h"
#include "tools/pack_io.h"
#include "tools/progress.h"

namespace flotilla::tools {
namespace {

constexpr uint64_t kBatchBytes = uint64_t{64} << 20;
constexpr uint64_t kMaxGapBytes = uint64_t{1} << 20;

std::string RegionName(const model::PackRegion& r) {
  return r.kind == "layer" ? absl::StrCat("region layer ", r.layer)
                           : absl::StrCat("region ", r.kind);
}

std::string Mismatch(const std::string& what, const std::string& path,
                     uint64_t offset, uint64_t length, uint64_t got,
                     uint64_t want) {
  return absl::StrCat(what, ": checksum mismatch in ", path, " at offset ",
                      offset, " (", length, " bytes): read ",
                      io::ChecksumHex(got), ", manifest has ",
                      io::ChecksumHex(want));
}

}  // namespace

absl::Status VerifyPack(const std::string& model_dir,
                        const std::string& pack_dir, int threads,
                        FILE* progress) {
  FLOTILLA_ASSIGN_OR_RETURN(model::PackManifest m,
                            model::LoadPackManifest(pack_dir));
  FLOTILLA_ASSIGN_OR_RETURN(std::unique_ptr<model::SafetensorsCheckpoint> ckpt,
                            model::SafetensorsCheckpoint::OpenDir(model_dir));
  FLOTILLA_ASSIGN_OR_RETURN(std::string fingerprint,
                            model::FingerprintCheckpoint(model_dir, *ckpt));
  if (fingerprint != m.source_fingerprint) {
    return absl::FailedPreconditionError(
        absl::StrCat(pack_dir,
                     "/manifest.json was packed from another checkpoint "
                     "(fingerprint ",
                     m.source_fingerprint, "); ", model_dir,
                     " has fingerprint ", fingerprint));
  }
  const std::string trunk_path = pack_dir + "/" + m.trunk_file;
  FLOTILLA_ASSIGN_OR_RETURN(io::File trunk,
                            io::File::Open(trunk_path, /*direct=*/true));
  const std::string expert_base = m.experts_in_model_dir ? model_dir : pack_dir;
  std::vector<io::File> files;
  for (const std::string& f : m.expert_files) {
    FLOTILLA_ASSIGN_OR_RETURN(
        io::File file, io::File::Open(expert_base + "/" + f, /*direct=*/true));
    files.push_back(std::move(file));
  }
  std::vector<Run> runs;
  uint64_t total = 0;
  for (const model::PackRegion& r : m.regions) total += r.size;
  for (const model::PackExpert& e : m.experts) {
    runs.push_back({e.file, e.offset, e.length});
    total += e.length;
  }
  const std::vector<RunBatch> batches =
      MakeRunBatches(runs, kBatchBytes, kMaxGapBytes);

  // Units: regions first, then expert batches; a failure is kept per unit
  // so the one reported is the first in manifest order, whatever the
  // threads' timing.
  const size_t n = m.regions.size() + batches.size();
  std::vector<std::string> failures(n);
  std::vector<io::AlignedBuffer> buffers(std::max(threads, 1));
  std::atomic<bool> never{false};
  ProgressMeter meter("verify", total, 0, progress);
  RunParallel(
      n, std::max(threads, 1),
      [&](size_t k, int worker) {
        io::AlignedBuffer* buf = &buffers[worker];
        if (k < m.regions.size()) {
          const model::PackRegion& r = m.regions[k];
          absl::StatusOr<uint64_t> sum =
              ChecksumFileRange(trunk, r.offset, r.size, buf);
          if (!sum.ok()) {
            failures[k] =
                absl::StrCat(RegionName(r), ": ", sum.status().message());
          } else if (*sum != r.checksum) {
            failures[k] = Mismatch(RegionName(r), trunk_path, r.offset, r.size,
                                   *sum, r.checksum);
          }
          meter.Add(r.size);
          return;
        }
        const RunBatch& b = batches[k - m.regions.size()];
        absl::StatusOr<std::vector<const uint8_t*>> starts =
            ReadRunBatch(files[b.file], runs, b, buf);
        for (size_t i = b.begin; i < b.end; ++i) {
          const model::PackExpert& e = m.experts[i];
          const std::string what =
              absl::StrCat("expert layer ", e.layer, " expert ", e.expert);
          meter.Add(e.length);
          if (!failures[k].empty()) continue;
          if (!starts.ok()) {
            failures[k] = absl::StrCat(what, ": ", starts.status().message());
            continue;
          }
          const uint64_t sum = io::Checksum64((*starts)[i - b.begin], e.length);
          if (sum != e.checksum) {
            failures[k] = Mismatch(what, files[b.file].path(), e.offset,
                                   e.length, sum, e.checksum);
          }
        }
      },
      &never);
  meter.Finish();
  size_t bad = 0;
  const std::string* first = nullptr;
  for (const std::string& f : failures) {
    if (f.empty()) continue;
    ++bad;
    if (first == nullptr) first = &f;
  }
  if (first != nullptr) {
    return absl::DataLossError(
        bad == 1 ? *first
                 : absl::StrCat(*first, " (and ", bad - 1,
                                " more failing regions/batches)"));
  }
  if (progress != nullptr) {
    std::fprintf(progress,
                 "verify: OK: %zu regions and %zu expert runs match %s\n",
                 m.regions.size(), m.experts.size(),
                 (pack_dir + "/manifest.json").c_str());
  }
  return absl::OkStatus();
}

}  // namespace flotilla::tools
