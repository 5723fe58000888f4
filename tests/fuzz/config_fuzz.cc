// config.json in both families' shapes: Kimi K3 (flat or under
// text_config / linear_attn_config) and Mixtral, from the same text.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/family/mixtral/mixtral_config.h"
#include "shared/model/json_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  (void)flotilla::model::ParseK3Config(text, "config.json");
  auto json = flotilla::model::internal::ParseJson(text, "config.json");
  if (json.ok())
    (void)flotilla::model::ParseMixtralConfig(*json, "config.json");
  return 0;
}
