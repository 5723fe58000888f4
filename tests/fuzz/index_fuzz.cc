// model.safetensors.index.json: the streaming weight_map reader.
#include <cstddef>
#include <cstdint>

#include "shared/model/safetensors_index.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  flotilla::fuzz::MemFile file(data, size);
  (void)flotilla::model::internal::ReadIndexWeightMap(file.path());
  return 0;
}
