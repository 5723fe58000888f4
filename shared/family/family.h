// A model family, described once: which config.json files it claims
// (model_type, architectures), how it parses them, and what its config
// gives everything that plans, packs and reports without knowing the
// family: the routed experts (model::MoeSpec), the neutral figures of the
// memory plan and the prediction (model::ModelShape), the trunk regions'
// fields (the pack schema) and the experts as released. Adding a family is a
// descriptor and one line in family_registry.cc (or a RegisterFamily call, as
// tests do).
#ifndef FLOTILLA_SHARED_FAMILY_FAMILY_H_
#define FLOTILLA_SHARED_FAMILY_FAMILY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "shared/model/model_shape.h"
#include "shared/model/moe_spec.h"
#include "shared/model/tensor_source.h"
#include "shared/pack/region_layout.h"
#include "shared/pack/trunk_schema.h"

namespace flotilla::family {

struct Family;

// One parsed config.json of some family.
class FamilyConfig {
 public:
  virtual ~FamilyConfig() = default;

  virtual const Family& family() const = 0;
  virtual model::MoeSpec Moe() const = 0;
  virtual model::ModelShape Shape() const = 0;
  // The fields of each trunk region (shared/pack/trunk_schema.h): one
  // region per layer, "globals", and the vocabulary ("embed", "lm_head").
  virtual std::vector<pack::FieldSpec> LayerSchema(int layer) const = 0;
  virtual std::vector<pack::FieldSpec> GlobalsSchema() const = 0;
  virtual std::vector<pack::FieldSpec> VocabSchema(bool lm_head) const = 0;
  // One routed expert's bytes as the family's release stores them, for
  // planning on a machine that does not hold the model, and how the
  // release stores its weights ("BF16 trunk and MXFP4 experts").
  virtual uint64_t ReleasedExpertRunBytes() const = 0;
  virtual std::string ReleasedFormats() const = 0;
  // That `source` (the checkpoint in `source_name`) is of this config,
  // before anything loops over the config's counts: InvalidArgument naming
  // what disagrees.
  virtual absl::Status CheckCheckpoint(const model::TensorSource& source,
                                       const std::string& source_name) const {
    return absl::OkStatus();
  }
  // The checkpoint as the routed-expert readers see it (the expert index,
  // LocalExperts, `flotilla-tool pack`): null when that is `raw` itself,
  // else a view over `raw` that must not outlive it (gpt-oss cuts its fused
  // all-expert tensors into per-expert ones: gpt_oss_expert_view.h). Errors
  // name the tensor the view cannot be made of.
  virtual absl::StatusOr<std::unique_ptr<model::TensorSource>> ExpertView(
      const model::TensorSource& raw) const {
    return std::unique_ptr<model::TensorSource>();
  }

  // Decoder layers. From Moe(), which is cheap: Shape() lays out every
  // layer's schema.
  int num_layers() const { return Moe().num_layers; }
};

// What the expert readers read: the family's ExpertView of `raw`, kept in
// `*view`, or `raw` itself.
absl::StatusOr<const model::TensorSource*> ExpertSourceOf(
    const FamilyConfig& config, const model::TensorSource& raw,
    std::unique_ptr<model::TensorSource>* view);

struct Family {
  std::string name;  // "kimi_k3", "mixtral"
  // config.json's model_type, exactly or by prefix ("kimi" claims every
  // "kimi_*"), or one of its architectures.
  std::vector<std::string> model_types;
  std::vector<std::string> model_type_prefixes;
  std::vector<std::string> architectures;
  // The chat template serve renders with when the model's
  // tokenizer_config.json has none it recognises and --chat-template is not
  // given: a name of coordinator/serve/chat_template.h ("kimi", "plain").
  std::string default_chat_template = "plain";
  // Claims a config without model_type (Kimi K3's flat configs).
  bool default_without_model_type = false;
  // InvalidArgument naming every bad field.
  absl::StatusOr<std::unique_ptr<FamilyConfig>> (*parse)(
      const nlohmann::json& root, const std::string& text,
      const std::string& source) = nullptr;
};

// A Family::parse for a family whose config.json is parsed by
// `kParseConfig` (json, source) -> StatusOr<Config> and described by
// `Wrapper` (a FamilyConfig constructed from the Config).
template <class Wrapper, auto kParseConfig>
absl::StatusOr<std::unique_ptr<FamilyConfig>> ParseAs(
    const nlohmann::json& root, const std::string& /*text*/,
    const std::string& source) {
  auto config = kParseConfig(root, source);
  if (!config.ok()) return config.status();
  return std::unique_ptr<FamilyConfig>(new Wrapper(std::move(*config)));
}

// Adds `family` (owned by the caller, alive for the process) ahead of the
// built-in ones: a test's own family, or a build's extra one.
void RegisterFamily(const Family* family);
std::vector<const Family*> RegisteredFamilies();

// The family that claims `config`; InvalidArgument naming model_type and
// the supported ones otherwise.
absl::StatusOr<const Family*> FindFamily(const nlohmann::json& config,
                                         const std::string& source);
absl::StatusOr<std::unique_ptr<FamilyConfig>> ParseFamilyConfig(
    const std::string& text, const std::string& source);
absl::StatusOr<std::unique_ptr<FamilyConfig>> LoadFamilyConfig(
    const std::string& config_path);
// InvalidArgument naming the count when `config` has more layers (4096) or
// routed experts per layer (65536) than any model: what sizes a model from
// its config alone (the plan, doctor) loops over them, and a config of 2^31
// layers would hang it. Where a checkpoint is at hand, its CheckCheckpoint
// comes first and says more (which count disagrees with the tensors).
absl::Status CheckLoopBounds(const FamilyConfig& config,
                             const std::string& source);
// The routed experts of any registered family's config.json: all the pack
// manifest's checks and the expert workers need of a family.
absl::StatusOr<model::MoeSpec> ParseMoeSpec(const std::string& text,
                                            const std::string& source);
absl::StatusOr<model::MoeSpec> LoadMoeSpec(const std::string& config_path);

// Trunk region sizes: what the plan pins, streams and reads per token.
struct TrunkSizes {
  std::vector<uint64_t> layer_region_bytes;  // per layer
  uint64_t vocab_region_bytes = 0;           // the embedding's region
  uint64_t globals_bytes = 0;
  int64_t vocab_row_bytes = 0;    // one embedding row as stored
  uint64_t expert_run_bytes = 0;  // the largest routed expert run
};

// As the release stores them (BF16 matrices, the family's expert format).
TrunkSizes ReleasedTrunkSizes(const FamilyConfig& config);
// As `source`'s tensors would be packed (their own dtypes); errors name
// the tensor. `expert_run_bytes` stays 0: the expert index knows the runs
// (shared/experts/expert_index.h).
absl::StatusOr<TrunkSizes> CheckpointTrunkSizes(
    const FamilyConfig& config, const model::TensorSource& source);
// (As a pack records them: pack::ManifestTrunkSizes.)

// Bytes of one row of `layout`'s 2-D "matrix" field (0 without one): one
// embedding row as stored.
uint64_t MatrixRowBytes(const pack::RegionLayout& layout);

// Adds the 2-D fields of `layout` (one region's matrices, each used once
// per decoded token) to `out`; its first `fields_before_experts` fields
// are computed before the layer waits for its routed experts.
void AddMatmuls(const pack::RegionLayout& layout, size_t fields_before_experts,
                std::vector<model::TrunkMatmul>* out);

// The matvecs of a decoded token for a family whose MoE layers compute
// every trunk field before waiting for their routed experts (DeepSeek-V3,
// Qwen3-MoE, gpt-oss): each layer's planned 2-D fields, then the BF16
// lm_head [vocab][hidden].
void AddTrunkMatmuls(const FamilyConfig& config, int vocab, int hidden,
                     std::vector<model::TrunkMatmul>* out);

}  // namespace flotilla::family

#endif  // FLOTILLA_SHARED_FAMILY_FAMILY_H_
