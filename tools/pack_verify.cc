// VerifyPack (declared in pack.h): re-reads a finished pack and checks
// every checksum of its manifest.
#include <algorithm>
#include <cinttypes>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "shared/base/status_macros.h"
#include "shared/io/checksum.h"
#include "shared/model/checkpoint_fingerprint.h"
#include "shared/model/safetensors.h"
#include "shared/pack/pack_manifest.h"
#include "shared/pack/region_layout.h"
#include "tools/pack.h"
#include "tools/pack_io.h"
#include "tools/progress.h"

namespace flotilla::tools {
namespace {

constexpr uint64_t kBatchBytes = uint64_t{64} << 20;
constexpr uint64_t kVerifyMaxGapBytes = uint64_t{1} << 20;

std::string RegionName(const pack::PackRegion& r) {
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

// Checks one region: its whole checksum and, for vocab regions, every
// chunk's. Returns the failure ("" when it matches).
std::string VerifyRegion(const io::File& trunk, const pack::PackRegion& r,
                         io::AlignedBuffer* buf) {
  const std::string name = RegionName(r);
  uint64_t moff = 0, mend = 0, chunk_bytes = 0;
  if (r.chunk_rows > 0) {
    const pack::RegionField* f = r.layout.Find("matrix");
    if (f == nullptr || f->shape.size() != 2 || f->shape[0] <= 0) {
      return absl::StrCat(name, ": chunked region without a matrix field");
    }
    moff = f->offset;
    mend = f->offset + f->nbytes;
    chunk_bytes = r.chunk_rows * (f->nbytes / f->shape[0]);
  }
  io::Checksum64Stream whole;
  auto chunk = std::make_unique<io::Checksum64Stream>();
  std::string failure;
  const absl::Status read = StreamFileRange(
      trunk, r.offset, r.size, buf,
      [&](const uint8_t* data, uint64_t pos, uint64_t n) {
        whole.Update(data, n);
        uint64_t a = std::max(pos, moff);
        const uint64_t b = std::min(pos + n, mend);
        while (chunk_bytes > 0 && a < b) {
          const uint64_t k = (a - moff) / chunk_bytes;
          const uint64_t end = std::min(moff + (k + 1) * chunk_bytes, mend);
          const uint64_t take = std::min(b, end) - a;
          chunk->Update(data + (a - pos), take);
          a += take;
          if (a != end) continue;
          const uint64_t got = chunk->Digest();
          const uint64_t len = end - (moff + k * chunk_bytes);
          if (failure.empty() && k < r.chunk_checksums.size() &&
              got != r.chunk_checksums[k]) {
            failure = Mismatch(
                absl::StrCat(
                    name, " rows ", k * r.chunk_rows, "..",
                    k * r.chunk_rows + len / (chunk_bytes / r.chunk_rows) - 1),
                trunk.path(), r.offset + moff + k * chunk_bytes, len, got,
                r.chunk_checksums[k]);
          }
          chunk = std::make_unique<io::Checksum64Stream>();
        }
      });
  if (!read.ok()) return absl::StrCat(name, ": ", read.message());
  // A chunk names the damaged rows: more useful than the whole region.
  if (!failure.empty()) return failure;
  if (whole.Digest() != r.checksum) {
    return Mismatch(name, trunk.path(), r.offset, r.size, whole.Digest(),
                    r.checksum);
  }
  return "";
}

}  // namespace

absl::Status VerifyPack(const std::string& model_dir,
                        const std::string& pack_dir, int threads,
                        FILE* progress) {
  FLOTILLA_ASSIGN_OR_RETURN(pack::PackManifest m,
                            pack::LoadPackManifest(pack_dir));
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
  std::vector<FileRun> runs;
  uint64_t total = 0;
  for (const pack::PackRegion& r : m.regions) total += r.size;
  for (const pack::PackExpert& e : m.experts) {
    runs.push_back({e.file, e.offset, e.length});
    total += e.length;
  }
  const std::vector<RunBatch> batches =
      MakeRunBatches(runs, kBatchBytes, kVerifyMaxGapBytes);

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
          const pack::PackRegion& r = m.regions[k];
          failures[k] = VerifyRegion(trunk, r, buf);
          meter.Add(r.size);
          return;
        }
        const RunBatch& b = batches[k - m.regions.size()];
        absl::StatusOr<std::vector<const uint8_t*>> starts =
            ReadRunBatch(files[b.file], runs, b, buf);
        for (size_t i = b.begin; i < b.end; ++i) {
          const pack::PackExpert& e = m.experts[i];
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
