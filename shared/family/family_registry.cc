// The registry of model families and the family-neutral helpers over a
// FamilyConfig (region sizes, matvec shapes).
#include <algorithm>
#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "shared/base/status_macros.h"
#include "shared/family/deepseek_v3/deepseek_v3_family.h"
#include "shared/family/family.h"
#include "shared/family/gpt_oss/gpt_oss_family.h"
#include "shared/family/kimi_k3/kimi_k3_family.h"
#include "shared/family/mixtral/mixtral_family.h"
#include "shared/family/qwen3_moe/qwen3_moe_family.h"
#include "shared/model/json_util.h"
#include "shared/pack/region_layout.h"

namespace flotilla::family {
namespace {

// Far above any released model (Kimi K3: 93 layers, 896 experts).
constexpr int kMaxLayers = 4096;
constexpr int kMaxExperts = 65536;

std::mutex& RegistryMutex() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}

std::vector<const Family*>& Registry() {
  // The built-in families: one line each.
  // DeepSeek-V3 comes before Kimi K3, whose "kimi" prefix would otherwise
  // claim Kimi K2's "kimi_k2".
  static auto* families = new std::vector<const Family*>{
      &DeepSeekV3Family(), &KimiK3Family(), &MixtralFamily(),
      &Qwen3MoeFamily(),   &GptOssFamily(),
  };
  return *families;
}

// Whether `f` claims `config` by its model_type or architectures.
bool ClaimsByName(const Family& f, const nlohmann::json& config) {
  const auto type = config.find("model_type");
  if (type != config.end()) {
    if (!type->is_string()) return false;
    const std::string t = type->get<std::string>();
    for (const std::string& m : f.model_types) {
      if (t == m) return true;
    }
    for (const std::string& p : f.model_type_prefixes) {
      if (absl::StartsWith(t, p)) return true;
    }
    return false;  // model_type decides when it is there
  }
  const auto arch = config.find("architectures");
  if (arch != config.end() && arch->is_array()) {
    for (const nlohmann::json& a : *arch) {
      if (!a.is_string()) continue;
      for (const std::string& m : f.architectures) {
        if (a.get<std::string>() == m) return true;
      }
    }
  }
  return false;
}

}  // namespace

uint64_t MatrixRowBytes(const pack::RegionLayout& layout) {
  const pack::RegionField* f = layout.Find("matrix");
  if (f == nullptr || f->shape.size() != 2 || f->shape[0] <= 0) return 0;
  return f->nbytes / static_cast<uint64_t>(f->shape[0]);
}

void RegisterFamily(const Family* family) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  auto& r = Registry();
  if (std::find(r.begin(), r.end(), family) != r.end()) return;
  r.insert(r.begin(), family);
}

std::vector<const Family*> RegisteredFamilies() {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  return Registry();
}

absl::StatusOr<const Family*> FindFamily(const nlohmann::json& config,
                                         const std::string& source) {
  if (!config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": the config must be a JSON object"));
  }
  const auto type = config.find("model_type");
  if (type != config.end() && !type->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": model_type must be a string"));
  }
  const std::vector<const Family*> families = RegisteredFamilies();
  std::vector<std::string> names;
  for (const Family* f : families) {
    if (ClaimsByName(*f, config)) return f;
    names.push_back(f->name);
  }
  if (type == config.end()) {
    for (const Family* f : families) {
      if (f->default_without_model_type) return f;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      source, ": model_type '",
      type == config.end() ? std::string("(none)") : type->get<std::string>(),
      "' is not supported (supported: ", absl::StrJoin(names, ", "), ")"));
}

absl::StatusOr<std::unique_ptr<FamilyConfig>> ParseFamilyConfig(
    const std::string& text, const std::string& source) {
  FLOTILLA_ASSIGN_OR_RETURN(nlohmann::json root,
                            model::internal::ParseJson(text, source));
  FLOTILLA_ASSIGN_OR_RETURN(const Family* family, FindFamily(root, source));
  return family->parse(root, text, source);
}

absl::StatusOr<const model::TensorSource*> ExpertSourceOf(
    const FamilyConfig& config, const model::TensorSource& raw,
    std::unique_ptr<model::TensorSource>* view) {
  absl::StatusOr<std::unique_ptr<model::TensorSource>> v =
      config.ExpertView(raw);
  if (!v.ok()) return v.status();
  *view = std::move(*v);
  return *view != nullptr ? view->get() : &raw;
}

absl::Status CheckLoopBounds(const FamilyConfig& config,
                             const std::string& source) {
  const model::MoeSpec moe = config.Moe();
  if (moe.num_layers <= kMaxLayers && moe.num_experts <= kMaxExperts) {
    return absl::OkStatus();
  }
  const bool layers = moe.num_layers > kMaxLayers;
  const bool experts = moe.num_experts > kMaxExperts;
  return absl::InvalidArgumentError(absl::StrCat(
      source, ": ",
      layers ? absl::StrCat("num_hidden_layers ", moe.num_layers) : "",
      layers && experts ? " and " : "",
      experts ? absl::StrCat("routed experts ", moe.num_experts) : "",
      " exceed the engine's limits (", kMaxLayers, " layers, ", kMaxExperts,
      " experts per layer)"));
}

absl::StatusOr<std::unique_ptr<FamilyConfig>> LoadFamilyConfig(
    const std::string& config_path) {
  FLOTILLA_ASSIGN_OR_RETURN(std::string text,
                            model::internal::ReadSmallFile(config_path));
  return ParseFamilyConfig(text, config_path);
}

absl::StatusOr<model::MoeSpec> ParseMoeSpec(const std::string& text,
                                            const std::string& source) {
  FLOTILLA_ASSIGN_OR_RETURN(std::unique_ptr<FamilyConfig> c,
                            ParseFamilyConfig(text, source));
  return c->Moe();
}

absl::StatusOr<model::MoeSpec> LoadMoeSpec(const std::string& config_path) {
  FLOTILLA_ASSIGN_OR_RETURN(std::unique_ptr<FamilyConfig> c,
                            LoadFamilyConfig(config_path));
  return c->Moe();
}

TrunkSizes ReleasedTrunkSizes(const FamilyConfig& c) {
  TrunkSizes s;
  const int layers = c.num_layers();
  for (int layer = 0; layer < layers; ++layer) {
    s.layer_region_bytes.push_back(
        pack::PlannedLayout(c.LayerSchema(layer)).size);
  }
  const pack::RegionLayout vocab = pack::PlannedLayout(c.VocabSchema(false));
  s.vocab_region_bytes = vocab.size;
  s.vocab_row_bytes = static_cast<int64_t>(MatrixRowBytes(vocab));
  s.globals_bytes = pack::PlannedLayout(c.GlobalsSchema()).size;
  s.expert_run_bytes = c.ReleasedExpertRunBytes();
  return s;
}

absl::StatusOr<TrunkSizes> CheckpointTrunkSizes(
    const FamilyConfig& c, const model::TensorSource& source) {
  TrunkSizes s;
  const int layers = c.num_layers();
  for (int layer = 0; layer < layers; ++layer) {
    FLOTILLA_ASSIGN_OR_RETURN(
        pack::RegionLayout l,
        pack::ResolveLayout(source, c.LayerSchema(layer)));
    s.layer_region_bytes.push_back(l.size);
  }
  FLOTILLA_ASSIGN_OR_RETURN(pack::RegionLayout vocab,
                            pack::ResolveLayout(source, c.VocabSchema(false)));
  s.vocab_region_bytes = vocab.size;
  s.vocab_row_bytes = static_cast<int64_t>(MatrixRowBytes(vocab));
  FLOTILLA_ASSIGN_OR_RETURN(pack::RegionLayout globals,
                            pack::ResolveLayout(source, c.GlobalsSchema()));
  s.globals_bytes = globals.size;
  return s;
}

void AddMatmuls(const pack::RegionLayout& layout, size_t fields_before_experts,
                std::vector<model::TrunkMatmul>* out) {
  for (size_t i = 0; i < layout.fields.size(); ++i) {
    const pack::RegionField& f = layout.fields[i];
    if (f.shape.size() != 2 || f.shape[0] <= 0 || f.shape[1] <= 0) continue;
    const bool before = i < fields_before_experts;
    out->push_back(
        model::TrunkMatmul{f.dtype, f.shape[0], f.shape[1], 1, before ? 1 : 0});
  }
}

void AddTrunkMatmuls(const FamilyConfig& config, int vocab, int hidden,
                     std::vector<model::TrunkMatmul>* out) {
  const model::MoeSpec moe = config.Moe();
  for (int layer = 0; layer < moe.num_layers; ++layer) {
    const pack::RegionLayout layout =
        pack::PlannedLayout(config.LayerSchema(layer));
    AddMatmuls(layout, moe.IsDenseLayer(layer) ? 0 : layout.fields.size(), out);
  }
  out->push_back(model::TrunkMatmul{model::DType::kBF16, std::max(1, vocab),
                                    std::max(1, hidden), 1, 0});
}

}  // namespace flotilla::family
