// Which model family a config.json describes, from its model_type: Kimi K3
// (no model_type, or one starting with "kimi") or Mixtral ("mixtral"). Each
// family has its own config parser; what the expert side needs is the
// family-neutral MoeSpec.
#ifndef FLOTILLA_SHARED_MODEL_MODEL_FAMILY_H_
#define FLOTILLA_SHARED_MODEL_MODEL_FAMILY_H_

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "shared/model/moe_spec.h"

namespace flotilla::model {

enum class ModelFamily { kKimiK3, kMixtral };
const char* ModelFamilyName(ModelFamily family);

// InvalidArgument naming model_type for a family this build does not run.
absl::StatusOr<ModelFamily> FamilyOf(const nlohmann::json& config,
                                     const std::string& source);
// Reads `config_path` and returns its family.
absl::StatusOr<ModelFamily> ReadModelFamily(const std::string& config_path);

// The routed experts of any supported family's config.json.
absl::StatusOr<MoeSpec> LoadMoeSpec(const std::string& config_path);
absl::StatusOr<MoeSpec> ParseMoeSpec(const std::string& json_text,
                                     const std::string& source);

}  // namespace flotilla::model

#endif  // FLOTILLA_SHARED_MODEL_MODEL_FAMILY_H_
