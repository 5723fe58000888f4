// The safetensors reader on an arbitrary file: header length, JSON, entries,
// the tiling of the data section, and one tensor read when it opens.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "shared/model/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  flotilla::fuzz::MemFile file(data, size);
  auto ckpt = flotilla::model::SafetensorsCheckpoint::OpenFile(file.path());
  if (!ckpt.ok()) return 0;
  for (const std::string& name : (*ckpt)->Names()) {
    const flotilla::model::TensorInfo* t = (*ckpt)->Find(name);
    if (t == nullptr || t->nbytes > (1u << 20)) continue;
    std::vector<char> bytes(t->nbytes);
    (void)(*ckpt)->ReadRaw(*t, bytes.data());
    break;
  }
  return 0;
}
