// config.json in every family's shape: Kimi K3 (flat or under text_config /
// linear_attn_config), Mixtral and DeepSeek-V3 / Kimi K2, from the same
// text; a config the registry accepts is also sized (its Shape() and
// schemas walk every layer, within the loop bounds the plan checks).
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "shared/family/deepseek_v3/deepseek_v3_config.h"
#include "shared/family/family.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/family/mixtral/mixtral_config.h"
#include "shared/model/json_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  (void)flotilla::model::ParseK3Config(text, "config.json");
  auto json = flotilla::model::internal::ParseJson(text, "config.json");
  if (json.ok()) {
    (void)flotilla::model::ParseMixtralConfig(*json, "config.json");
    (void)flotilla::model::ParseDeepSeekV3Config(*json, "config.json");
  }
  auto config =
      flotilla::family::ParseFamilyConfig(std::string(text), "config.json");
  if (config.ok() &&
      flotilla::family::CheckLoopBounds(**config, "config.json").ok()) {
    (void)(*config)->Shape();
    (void)(*config)->VocabSchema(true);
  }
  return 0;
}
