// The routed experts (the family-neutral MoeSpec) of a config.json, for the
// libraries below the family registry (shared/family): the pack manifest's
// checks, the expert workers, the worker packer. Families registered there
// (family::RegisterFamily) are registered here too, so any family the
// process knows is read; the built-in ones (Kimi K3: no model_type, or one
// starting with "kimi"; Mixtral: "mixtral") are known without it.
#ifndef FLOTILLA_SHARED_MODEL_MODEL_FAMILY_H_
#define FLOTILLA_SHARED_MODEL_MODEL_FAMILY_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "shared/model/moe_spec.h"

namespace flotilla::model {

// A family registered from above this library: whether it claims a
// config, and its routed experts.
struct MoeFamily {
  std::string name;
  std::function<bool(const nlohmann::json& config)> claims;
  std::function<absl::StatusOr<MoeSpec>(const nlohmann::json& config,
                                        const std::string& text,
                                        const std::string& source)>
      moe;
};
// Consulted before the built-in families, latest first.
void RegisterMoeFamily(MoeFamily family);

// The routed experts of any supported family's config.json.
absl::StatusOr<MoeSpec> LoadMoeSpec(const std::string& config_path);
absl::StatusOr<MoeSpec> ParseMoeSpec(const std::string& json_text,
                                     const std::string& source);

}  // namespace flotilla::model

#endif  // FLOTILLA_SHARED_MODEL_MODEL_FAMILY_H_
