#include "tools/pack.h"

#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/experts/expert_codec.h"
#include "shared/io/checksum.h"
#include "shared/model/safetensors.h"
#include "shared/pack/pack_manifest.h"
#include "shared/pack/region_builder.h"
#include "tools/pack_io.h"
#include "tools/pack_plan.h"
#include "tools/pack_state.h"
#include "tools/progress.h"

namespace flotilla::tools {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// In place, batches skip at most this much between runs (in K3's shards a
// layer's 896 experts are back to back; a gap is trunk data).
constexpr uint64_t kMaxGapBytes = uint64_t{1} << 20;
// While experts are processed the progress record is rewritten at most this
// often; a killed pack redoes at most this much work.
constexpr auto kStateInterval = std::chrono::seconds(1);

std::string RegionName(const PlannedRegion& r) {
  return r.kind == "layer" ? absl::StrCat("layer ", r.layer) : r.kind;
}

// One unit of work: a trunk region, or a batch of expert runs.
struct Unit {
  bool region = false;
  size_t index = 0;  // region index, or batch index
};

class Packer {
 public:
  Packer(const PackOptions& options, const PackPlan& plan,
         const model::TensorSource& source, std::string dir, PackState state)
      : options_(options),
        plan_(plan),
        source_(source),
        dir_(std::move(dir)),
        state_(std::move(state)) {}

  absl::StatusOr<PackResult> Run(bool fresh);

 private:
  absl::Status OpenFiles(bool fresh);
  absl::StatusOr<RegionSums> PackRegion(size_t i);
  // The codec's value check (FP8: no NaN code, positive scales) on
  // plan_.experts[i]'s bytes at `run`.
  absl::Status CheckValues(size_t i, const uint8_t* run) const;
  absl::Status PackBatch(const RunBatch& b, io::AlignedBuffer* buf,
                         std::vector<uint64_t>* sums);
  // Records a finished unit; saves the state when due.
  void Done(const Unit& u, RegionSums region_sums,
            const std::vector<uint64_t>& expert_sums);
  absl::Status SaveState();  // requires mu_
  absl::Status Finish();
  // Where the planned experts' tensors are read: the family's view, if any.
  const model::TensorSource& ExpertSource() const {
    return plan_.expert_view != nullptr ? *plan_.expert_view : source_;
  }

  const PackOptions& options_;
  const PackPlan& plan_;
  const model::TensorSource& source_;
  const std::string dir_;
  OutFile trunk_, experts_out_;
  std::vector<io::File> shards_;  // in-place expert files
  std::vector<FileRun> runs_;     // per expert, where its run is read
  std::vector<RunBatch> batches_;
  std::unique_ptr<ProgressMeter> progress_;
  std::atomic<bool> stop_{false};

  std::mutex mu_;
  PackState state_;  // guarded by mu_
  absl::Status error_;
  uint64_t units_done_ = 0;
  Clock::time_point last_save_;
};

absl::Status Packer::OpenFiles(bool fresh) {
  FLOTILLA_ASSIGN_OR_RETURN(
      trunk_, OutFile::Open(dir_ + "/" + kTrunkFile, plan_.trunk_bytes, fresh));
  if (!plan_.experts_in_model_dir) {
    FLOTILLA_ASSIGN_OR_RETURN(experts_out_,
                              OutFile::Open(dir_ + "/" + kExpertsFile,
                                            plan_.experts_file_bytes, fresh));
  } else {
    if (fresh) FLOTILLA_RETURN_IF_ERROR(RemoveFile(dir_ + "/" + kExpertsFile));
    for (const std::string& f : plan_.expert_files) {
      FLOTILLA_ASSIGN_OR_RETURN(
          io::File file,
          io::File::Open(options_.model_dir + "/" + f, /*direct=*/true));
      shards_.push_back(std::move(file));
    }
  }
  for (const PlannedExpert& e : plan_.experts) {
    runs_.push_back({e.file, e.offset, e.length});
  }
  // Packed runs are separated only by padding to 4 KiB.
  batches_ = MakeRunBatches(
      runs_, options_.batch_bytes,
      plan_.experts_in_model_dir ? kMaxGapBytes : io::kDirectIoAlignment);
  return absl::OkStatus();
}

absl::StatusOr<RegionSums> Packer::PackRegion(size_t i) {
  const PlannedRegion& r = plan_.regions[i];
  const family::FamilyConfig& c = *plan_.config;
  absl::StatusOr<pack::Region> region =
      pack::BuildRegion(source_, r.kind == "layer"     ? c.LayerSchema(r.layer)
                                 : r.kind == "embed"   ? c.VocabSchema(false)
                                 : r.kind == "lm_head" ? c.VocabSchema(true)
                                                       : c.GlobalsSchema());
  if (!region.ok()) {
    return absl::Status(region.status().code(),
                        absl::StrCat("building region ", RegionName(r), ": ",
                                     region.status().message()));
  }
  if (pack::LayoutToJson(region->layout) != pack::LayoutToJson(r.layout)) {
    return absl::InternalError(absl::StrCat(
        "region ", RegionName(r),
        ": the region builder's layout differs from the pack plan's"));
  }
  RegionSums sums;
  sums.checksum = io::Checksum64(region->bytes.data(), r.layout.size);
  sums.chunks = ChunkChecksums(r.kind, r.layout, region->bytes.data());
  FLOTILLA_RETURN_IF_ERROR(
      trunk_.Write(region->bytes.data(), r.layout.size, r.offset));
  FLOTILLA_RETURN_IF_ERROR(trunk_.Sync());
  progress_->Add(r.layout.size);
  return sums;
}

absl::Status Packer::CheckValues(size_t i, const uint8_t* run) const {
  const PlannedExpert& e = plan_.experts[i];
  FLOTILLA_ASSIGN_OR_RETURN(
      const experts::ExpertCodec* codec,
      experts::CodecNamed(plan_.expert_format, options_.model_dir));
  const model::MoeSpec moe = plan_.config->Moe();
  const uint64_t h = moe.hidden_size, inter = moe.intermediate_size;
  return base::WithContext(
      experts::CheckRunValues(
          *codec, run, e.tensor_offsets.data(),
          {experts::MatrixShape{inter, h}, experts::MatrixShape{h, inter},
           experts::MatrixShape{inter, h}}),
      absl::StrCat("layer ", e.layer, " expert ", e.expert));
}

absl::Status Packer::PackBatch(const RunBatch& b, io::AlignedBuffer* buf,
                               std::vector<uint64_t>* sums) {
  sums->clear();
  uint64_t bytes = 0;
  if (plan_.experts_in_model_dir) {
    FLOTILLA_ASSIGN_OR_RETURN(std::vector<const uint8_t*> starts,
                              ReadRunBatch(shards_[b.file], runs_, b, buf));
    for (size_t i = b.begin; i < b.end; ++i) {
      FLOTILLA_RETURN_IF_ERROR(CheckValues(i, starts[i - b.begin]));
      sums->push_back(io::Checksum64(starts[i - b.begin], runs_[i].length));
      bytes += runs_[i].length;
    }
  } else {
    const uint64_t length = io::AlignUp(b.span_length);
    if (buf->size() < length) {
      FLOTILLA_ASSIGN_OR_RETURN(
          *buf, io::AlignedBuffer::Allocate(length, /*prefault=*/false));
    }
    std::memset(buf->data(), 0, length);
    for (size_t i = b.begin; i < b.end; ++i) {
      const PlannedExpert& e = plan_.experts[i];
      uint8_t* base = buf->data() + (e.offset - b.span_offset);
      for (size_t t = 0; t < e.tensors.size(); ++t) {
        FLOTILLA_RETURN_IF_ERROR(
            ExpertSource().ReadRaw(*e.tensors[t], base + e.tensor_offsets[t]));
      }
      FLOTILLA_RETURN_IF_ERROR(CheckValues(i, base));
      sums->push_back(io::Checksum64(base, e.length));
      bytes += e.length;
    }
    FLOTILLA_RETURN_IF_ERROR(
        experts_out_.Write(buf->data(), length, b.span_offset));
    FLOTILLA_RETURN_IF_ERROR(experts_out_.Sync());
  }
  progress_->Add(bytes);
  return absl::OkStatus();
}

absl::Status Packer::SaveState() {
  last_save_ = Clock::now();
  return WriteFileAtomically(dir_ + "/" + kStateFile, PackStateToJson(state_));
}

void Packer::Done(const Unit& u, RegionSums region_sums,
                  const std::vector<uint64_t>& expert_sums) {
  std::lock_guard<std::mutex> lock(mu_);
  if (u.region) {
    state_.regions[u.index] = std::move(region_sums);
  } else {
    const RunBatch& b = batches_[u.index];
    for (size_t i = b.begin; i < b.end; ++i) {
      state_.experts[i] = expert_sums[i - b.begin];
    }
  }
  ++units_done_;
  if (options_.stop_after_units > 0 &&
      units_done_ >= options_.stop_after_units) {
    stop_ = true;
  }
  if (u.region || stop_ || Clock::now() - last_save_ >= kStateInterval) {
    absl::Status s = SaveState();
    if (!s.ok() && error_.ok()) {
      error_ = s;
      stop_ = true;
    }
  }
}

absl::Status Packer::Finish() {
  std::vector<RegionSums> region_sums;
  std::vector<uint64_t> expert_sums;
  for (const auto& s : state_.regions) region_sums.push_back(*s);
  for (const auto& s : state_.experts) expert_sums.push_back(*s);
  const pack::PackManifest m =
      plan_.ToManifest(region_sums, expert_sums, /*complete=*/true);
  FLOTILLA_RETURN_IF_ERROR(WritePackManifest(dir_, m));
  FLOTILLA_RETURN_IF_ERROR(RemoveFile(dir_ + "/" + kStateFile));
  return SyncDir(dir_);
}

absl::StatusOr<PackResult> Packer::Run(bool fresh) {
  if (fresh) {
    // The state goes first and a stale manifest goes before any data
    // changes, so an interruption never leaves a "complete" manifest over
    // half-rewritten files.
    FLOTILLA_RETURN_IF_ERROR(SaveState());
    FLOTILLA_RETURN_IF_ERROR(RemoveFile(dir_ + "/" + kManifestFile));
    FLOTILLA_RETURN_IF_ERROR(SyncDir(dir_));
  }
  FLOTILLA_RETURN_IF_ERROR(OpenFiles(fresh));
  std::vector<Unit> units;
  uint64_t already = 0;
  for (size_t i = 0; i < plan_.regions.size(); ++i) {
    if (state_.regions[i]) {
      already += plan_.regions[i].layout.size;
    } else {
      units.push_back({true, i});
    }
  }
  for (size_t b = 0; b < batches_.size(); ++b) {
    bool pending = false;
    for (size_t i = batches_[b].begin; i < batches_[b].end; ++i) {
      if (state_.experts[i]) {
        already += runs_[i].length;
      } else {
        pending = true;
      }
    }
    if (pending) units.push_back({false, b});
  }
  progress_ = std::make_unique<ProgressMeter>(
      "pack", plan_.trunk_bytes + plan_.expert_bytes, already,
      options_.progress);
  last_save_ = Clock::now();
  std::vector<io::AlignedBuffer> buffers(options_.threads);
  RunParallel(
      units.size(), options_.threads,
      [&](size_t k, int worker) {
        const Unit& u = units[k];
        absl::Status s;
        RegionSums region_sums;
        std::vector<uint64_t> sums;
        if (u.region) {
          absl::StatusOr<RegionSums> r = PackRegion(u.index);
          s = r.status();
          if (r.ok()) region_sums = std::move(*r);
        } else {
          s = PackBatch(batches_[u.index], &buffers[worker], &sums);
        }
        if (s.ok()) return Done(u, std::move(region_sums), sums);
        std::lock_guard<std::mutex> lock(mu_);
        if (error_.ok()) error_ = s;
        stop_ = true;
      },
      &stop_);
  progress_->Finish();
  PackResult result;
  result.pack_dir = dir_;
  result.resumed = !fresh;
  result.units_done = units_done_;
  result.bytes = progress_->done() - already;
  result.seconds = progress_->seconds();
  result.experts_in_model_dir = plan_.experts_in_model_dir;
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_.ok()) {
    (void)SaveState();  // keep what finished; the error is what matters
    return error_;
  }
  if (state_.regions_done() < state_.regions.size() ||
      state_.experts_done() < state_.experts.size()) {
    FLOTILLA_RETURN_IF_ERROR(SaveState());
    return absl::AbortedError(absl::StrCat(
        "pack stopped after ", units_done_,
        " units as asked (FLOTILLA_PACK_STOP_AFTER); run it again to "
        "resume"));
  }
  FLOTILLA_RETURN_IF_ERROR(Finish());
  return result;
}

}  // namespace

absl::StatusOr<std::string> MakePackDir(const PackOptions& options) {
  const std::string dir = options.out_dir.empty()
                              ? options.model_dir + "/flotilla-pack"
                              : options.out_dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(absl::StrCat(
        "cannot create pack dir ", dir, ": ", ec.message(),
        options.out_dir.empty() ? " (pass --out to write it elsewhere)" : ""));
  }
  return dir;
}

absl::StatusOr<PackResult> PackCheckpoint(const PackOptions& options) {
  if (options.model_dir.empty()) {
    return absl::InvalidArgumentError("--model is required");
  }
  if (options.batch_bytes == 0) {
    return absl::InvalidArgumentError("batch_bytes must be > 0");
  }
  if (options.threads < 1 || options.threads > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("--threads must be in 1..64 (got ", options.threads, ")"));
  }
  FLOTILLA_ASSIGN_OR_RETURN(
      std::unique_ptr<model::SafetensorsCheckpoint> ckpt,
      model::SafetensorsCheckpoint::OpenDir(options.model_dir));
  FLOTILLA_ASSIGN_OR_RETURN(PackPlan plan, PlanPack(options.model_dir, *ckpt));
  FLOTILLA_ASSIGN_OR_RETURN(const std::string dir, MakePackDir(options));
  FLOTILLA_ASSIGN_OR_RETURN(
      PackStart start,
      InspectPackDir(dir, plan, options.force, options.progress));
  PackResult result;
  if (start.complete) {
    if (PathExists(dir + "/" + kStateFile)) {
      FLOTILLA_RETURN_IF_ERROR(RemoveFile(dir + "/" + kStateFile));
    }
    result.pack_dir = dir;
    result.already_complete = true;
    result.experts_in_model_dir = plan.experts_in_model_dir;
  } else {
    const bool fresh = !start.resume.has_value();
    PackState state;
    if (fresh) {
      state.fingerprint = plan.fingerprint;
      state.plan_id = plan.Id();
      state.regions.resize(plan.regions.size());
      state.experts.resize(plan.experts.size());
    } else {
      state = std::move(*start.resume);
    }
    Packer packer(options, plan, *ckpt, dir, std::move(state));
    FLOTILLA_ASSIGN_OR_RETURN(result, packer.Run(fresh));
  }
  if (options.verify) {
    FLOTILLA_RETURN_IF_ERROR(
        VerifyPack(options.model_dir, dir, options.threads, options.progress));
  }
  return result;
}

}  // namespace flotilla::tools
