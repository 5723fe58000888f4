#include "shared/model/model_family.h"

#include <mutex>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/model/config.h"
#include "shared/model/json_util.h"
#include "shared/model/mixtral_config.h"

namespace flotilla::model {
namespace {

// The built-in families, for processes that registered none.
enum class ModelFamily { kKimiK3, kMixtral };

absl::StatusOr<ModelFamily> FamilyOf(const nlohmann::json& config,
                                     const std::string& source) {
  if (!config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": the config must be a JSON object"));
  }
  const auto it = config.find("model_type");
  if (it == config.end()) return ModelFamily::kKimiK3;
  if (!it->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": model_type must be a string"));
  }
  const std::string type = it->get<std::string>();
  if (type == "mixtral") return ModelFamily::kMixtral;
  if (absl::StartsWith(type, "kimi")) return ModelFamily::kKimiK3;
  return absl::InvalidArgumentError(
      absl::StrCat(source, ": model_type '", type,
                   "' is not supported (supported: mixtral, kimi_k3)"));
}

std::mutex& RegisteredMutex() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}
std::vector<MoeFamily>& Registered() {
  static auto* families = new std::vector<MoeFamily>;
  return *families;
}

}  // namespace

void RegisterMoeFamily(MoeFamily family) {
  std::lock_guard<std::mutex> lock(RegisteredMutex());
  Registered().insert(Registered().begin(), std::move(family));
}

absl::StatusOr<MoeSpec> ParseMoeSpec(const std::string& json_text,
                                     const std::string& source) {
  FLOTILLA_ASSIGN_OR_RETURN(nlohmann::json root,
                            internal::ParseJson(json_text, source));
  std::vector<MoeFamily> registered;
  {
    std::lock_guard<std::mutex> lock(RegisteredMutex());
    registered = Registered();
  }
  if (root.is_object()) {
    for (const MoeFamily& f : registered) {
      if (f.claims(root)) return f.moe(root, json_text, source);
    }
  }
  FLOTILLA_ASSIGN_OR_RETURN(ModelFamily family, FamilyOf(root, source));
  if (family == ModelFamily::kMixtral) {
    FLOTILLA_ASSIGN_OR_RETURN(MixtralConfig c,
                              ParseMixtralConfig(root, source));
    return c.Moe();
  }
  FLOTILLA_ASSIGN_OR_RETURN(K3Config c, ParseK3Config(json_text, source));
  return c.Moe();
}

absl::StatusOr<MoeSpec> LoadMoeSpec(const std::string& config_path) {
  FLOTILLA_ASSIGN_OR_RETURN(std::string text,
                            internal::ReadSmallFile(config_path));
  return ParseMoeSpec(text, config_path);
}

}  // namespace flotilla::model
