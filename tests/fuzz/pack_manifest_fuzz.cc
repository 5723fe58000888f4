// A pack's manifest.json and expert_table.bin together: the first 4 bytes
// (little-endian) give the JSON's length, the rest after it is the table.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/strings/string_view.h"
#include "shared/pack/expert_table.h"
#include "shared/pack/pack_manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t json_bytes;
  std::memcpy(&json_bytes, data, 4);
  const absl::string_view rest(reinterpret_cast<const char*>(data) + 4,
                               size - 4);
  const size_t split = json_bytes % (rest.size() + 1);
  (void)flotilla::pack::DecodePackManifest(rest.substr(0, split),
                                           rest.substr(split), "/pack");
  (void)flotilla::pack::DecodeExpertTable(rest, "expert_table.bin");
  return 0;
}
