// Opening a model the way the command line asks for it: in memory (a small
// model with no pack), or streamed from a pack within a memory budget. Also
// the planner entry point behind `generate --plan`, which needs only a
// config.json (a user sizing hardware for a model they do not hold yet).
#ifndef FLOTILLA_COORDINATOR_ENGINE_H_
#define FLOTILLA_COORDINATOR_ENGINE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/model/language_model.h"
#include "shared/family/family.h"
#include "shared/io/batch_reader.h"
#include "shared/io/memory_budget.h"
#include "shared/plan/memory_plan.h"
#include "shared/transport/tls_options.h"

namespace flotilla::coordinator {

class StreamingExperts;
class StreamingTrunk;
class LayerSource;

struct EngineOptions {
  std::string model_dir;
  std::string config_path;   // empty: <model_dir>/config.json
  std::string pack_dir;      // empty: <model_dir>/flotilla-pack when present
  std::string mem = "auto";  // size or preset (see io::ResolveBudget)
  int threads = 1;
  // Positions each sequence's state is charged for (the context); 0: the
  // model's max_position_embeddings, capped so that `sequences` states take
  // at most a quarter of the budget (ResolveMaxContext).
  int max_context = 4096;
  // Sequences held at once, each charged for max_context positions, and
  // the prefix cache's bytes (serve --max-batch, --prefix-cache).
  int sequences = 1;
  uint64_t prefix_cache_bytes = 0;
  int prefill_chunk = 256;  // tokens per forward pass at most
  uint64_t expert_cache_bytes = 0;
  // Before each MoE layer's attention, start reading a guess of its
  // experts: top (k + expert_prefetch_extra) per token.
  bool expert_prefetch = true;
  int expert_prefetch_extra = 0;
  std::string reader = "auto";  // auto, uring, pread
  // Tests only: readers that inject faults (empty: io::CreateBatchReader).
  io::ReaderFactory reader_factory;
  int queue_depth = 32;
  bool verify_checksums = true;
  // Expert workers ("host:port", in combine order); empty: experts run in
  // this process. With workers, routed experts go to RemoteExperts
  // (remote_experts.h) and this process needs no expert bytes.
  std::vector<std::string> workers;
  int rpc_deadline_ms = 10000;  // deadline of every expert-worker call
  // Wait this long for workers still starting (0: a worker that does not
  // answer at once is down; see RemoteExpertsOptions::connect_timeout_ms).
  int connect_timeout_ms = 0;
  // > 0: probe the workers this often while idle (serve's /readyz).
  int worker_health_interval_ms = 0;
  transport::TlsFiles worker_tls;  // CA, and cert + key for mutual TLS
  double disk_gbps = 3.0;          // for predictions in the plan
  int max_pinned_layers = -1;      // cap on pinned trunk layers (-1 = no cap)
  bool stream_vocab = false;       // stream embedding rows and the lm_head
};

// What OpenEngine built, and where its counters live.
struct Engine {
  std::unique_ptr<LanguageModel> model;
  std::string family;  // its name in the family registry (shared/family)
  // The model's config, parsed once by OpenEngine for the family's opener.
  std::shared_ptr<const family::FamilyConfig> config;
  plan::MemoryPlan plan;
  bool streaming = false;
  std::string pack_dir;
  StreamingTrunk* trunk = nullptr;      // owned by model; null in memory
  StreamingExperts* experts = nullptr;  // owned by model; null in memory
  // Another family's streamed layers (owned by model; null in memory), whose
  // reads count as the trunk's in --stats and /metrics.
  const LayerSource* trunk_layers = nullptr;
  std::unique_ptr<io::MemoryAccountant> accountant;
  // Trimmed RSS once a streaming model is open (0 otherwise): what
  // plan.open_bytes() predicts.
  uint64_t rss_after_open_bytes = 0;
  // The context every sequence state was charged for (options.max_context,
  // or what 0 resolved to), and why.
  int max_context = 0;
  std::string max_context_reason;
};

// The context of EngineOptions::max_context == 0 for a model of `shape`
// under `budget` bytes with `sequences` states: the model's positions
// (4096 when the config gives none), or, when that many states would take
// more than a quarter of the budget, the largest multiple of 256 that fits
// the quarter (never below min(4096, the model's), which the plan then
// holds or refuses). `reason` says which, for the startup line.
int ResolveMaxContext(const model::ModelShape& shape, uint64_t budget,
                      int sequences, std::string* reason);
// The context of a config that gives no positions (or one past the loop
// bounds, which its family then refuses).
inline constexpr int kFallbackContext = 4096;

// Finds the model's family (shared/family) and opens it with that family's
// engine opener.
absl::StatusOr<std::unique_ptr<Engine>> OpenEngine(
    const EngineOptions& options);

// Opens a model of one family into `engine` (which has its family's name,
// the model's parsed config, and an accountant holding the budget of
// options.mem).
using EngineOpener = absl::StatusOr<std::unique_ptr<Engine>> (*)(
    const EngineOptions& options, std::unique_ptr<Engine> engine);
// Adds (or replaces) the opener of `family_name`: a build's extra family, or
// a test's own.
void RegisterEngineOpener(const std::string& family_name, EngineOpener open);

// The plan for `options` without loading weights, for a model of any
// family: region sizes come from the pack manifest when there is one, else
// from the config alone (as the family's release stores its weights).
// `config`, when given, receives the model's config (also when the plan
// itself fails).
absl::StatusOr<plan::MemoryPlan> PlanEngine(
    const EngineOptions& options,
    std::unique_ptr<family::FamilyConfig>* config = nullptr);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_ENGINE_H_
