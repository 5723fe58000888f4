#include "coordinator/stream/streaming_experts.h"

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/model/safetensors.h"

namespace flotilla::coordinator {

using experts::ExpertIndex;
using experts::ExpertKey;

absl::StatusOr<std::unique_ptr<StreamingExperts>> StreamingExperts::Create(
    const std::string& model_dir, const model::MoeSpec& config,
    const pack::PackManifest* manifest, const std::string& pack_dir,
    kernels::ThreadPool* pool, const StreamingExpertsOptions& options) {
  if (manifest != nullptr) {
    if (options.only_layer >= 0) {
      return absl::InvalidArgumentError(
          "only_layer is not supported with a pack manifest");
    }
    FLOTILLA_ASSIGN_OR_RETURN(
        ExpertIndex index,
        ExpertIndex::FromPackManifest(*manifest, config, model_dir, pack_dir));
    return FromIndex(std::move(index), config, pool, options);
  }
  // Only the headers are parsed; the checkpoint object is dropped once the
  // index holds the run locations.
  FLOTILLA_ASSIGN_OR_RETURN(auto source,
                            model::SafetensorsCheckpoint::OpenDir(model_dir));
  experts::ExpertIndexOptions index_options;
  index_options.config = &config;
  index_options.only_layer = options.only_layer;
  FLOTILLA_ASSIGN_OR_RETURN(
      ExpertIndex index, ExpertIndex::FromTensorSource(*source, index_options));
  return FromIndex(std::move(index), config, pool, options);
}

absl::StatusOr<std::unique_ptr<StreamingExperts>> StreamingExperts::FromIndex(
    ExpertIndex index, const model::MoeSpec& config, kernels::ThreadPool* pool,
    const StreamingExpertsOptions& options) {
  if (index.shape(0).rows != static_cast<uint64_t>(config.intermediate_size) ||
      index.shape(0).cols != static_cast<uint64_t>(config.hidden_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("expert index has w1 [", index.shape(0).rows, ",",
                     index.shape(0).cols, "] but the config wants [",
                     config.intermediate_size, ",", config.hidden_size, "]"));
  }
  experts::ExpertEngineOptions eo;
  eo.fetcher.slots = options.slots;
  eo.fetcher.queue_depth = options.queue_depth;
  eo.fetcher.reader = options.reader;
  eo.fetcher.reader_factory = options.reader_factory;
  eo.fetcher.direct_io = options.direct_io;
  eo.fetcher.verify_checksums = options.verify_checksums;
  eo.fetcher.prefault = options.prefault;
  eo.fetcher.accountant = options.accountant;
  eo.cache_bytes = options.cache_bytes;
  FLOTILLA_ASSIGN_OR_RETURN(
      auto engine,
      experts::ExpertEngine::Create(std::move(index), config.Activation(),
                                    pool, eo));
  return std::unique_ptr<StreamingExperts>(
      new StreamingExperts(std::move(engine), options.lookahead));
}

absl::Status StreamingExperts::ComputeLayer(
    int layer, const float* z, int rows, const std::vector<ExpertTask>& tasks,
    float* out) {
  return engine_->ComputeLayer(layer, z, rows, tasks.data(), tasks.size(), out);
}

std::vector<ExpertKey> StreamingExperts::KnownKeys(
    int layer, const std::vector<int>& experts) const {
  std::vector<ExpertKey> keys;
  keys.reserve(experts.size());
  for (int e : experts) {
    const ExpertKey key{layer, e};
    if (engine_->index().Find(key) != nullptr) keys.push_back(key);
  }
  return keys;
}

absl::Status StreamingExperts::PrefetchLayer(int layer,
                                             const std::vector<int>& experts) {
  if (!lookahead_enabled_) return absl::OkStatus();
  return engine_->Prefetch(KnownKeys(layer, experts));
}

ExpertBackendStats StreamingExperts::backend_stats() const {
  const experts::FetchStats& f = stats();
  ExpertBackendStats s;
  s.bytes_read = f.bytes_read;
  s.experts_read = f.reads;
  s.experts_used = f.experts_requested;
  s.cache_hits = f.cache_hits;
  s.prefetch_hits = f.prefetch_hits;
  s.io_wait_seconds = f.io_wait_seconds;
  s.verify_seconds = f.verify_seconds;
  s.early_verify_seconds = f.early_verify_seconds;
  s.compute_seconds = f.compute_seconds;
  s.read_latency = f.read_latency;
  return s;
}

std::string StreamingExperts::StatsReport() const {
  experts::ExpertFetcher& f = engine_->fetcher();
  return absl::StrCat(
      "expert streaming: reader ", f.reader_name(), ", O_DIRECT ",
      f.all_direct() ? "on" : "off (filesystem refused it; page cache in play)",
      ", ", f.slots(), " slots + ", f.cache_slots(), " cache slots of ",
      io::FormatBytesBinary(f.slot_bytes()), " (",
      io::FormatBytesBinary(f.buffer_bytes()), "), lookahead ",
      lookahead_enabled_ ? "on" : "off", "\n", stats().ToString());
}

}  // namespace flotilla::coordinator
