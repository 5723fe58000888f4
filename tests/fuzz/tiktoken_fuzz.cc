// tiktoken.model lines and tokenizer_config.json's added tokens.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "shared/tokenizer/tiktoken_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  (void)flotilla::tokenizer::ParseTiktokenModel(text, "tiktoken.model");
  (void)flotilla::tokenizer::ParseAddedTokens(text, "tokenizer_config.json");
  return 0;
}
