// tokenizer.json (Hugging Face BPE pipelines); when one loads, it encodes
// and decodes a fixed text so that what the file built is exercised.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "shared/tokenizer/hf_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  auto tok =
      flotilla::tokenizer::HfTokenizer::FromJson(text, "", "tokenizer.json");
  if (!tok.ok()) return 0;
  const std::vector<int32_t> ids =
      (*tok)->Encode("Once upon a time, 12 cats \xe2\x9c\x93!");
  (void)(*tok)->Decode(ids);
  return 0;
}
