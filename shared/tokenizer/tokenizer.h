// The tokenizer interface, and loading whichever one a model folder ships:
// Kimi K3's tiktoken.model (tiktoken_bpe.h: ranks, the Kimi split pattern,
// added tokens from tokenizer_config.json; id-exact with OpenAI's tiktoken)
// or a Hugging Face tokenizer.json (hf_tokenizer.h).
#ifndef FLOTILLA_SHARED_TOKENIZER_TOKENIZER_H_
#define FLOTILLA_SHARED_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace flotilla::tokenizer {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Loads <dir>/tiktoken.model and <dir>/tokenizer_config.json (Kimi
  // pattern). NotFound when the directory has no tiktoken.model.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> LoadKimi(
      const std::string& dir);

  // The tokenizer of a model folder: tiktoken.model (Kimi) when present,
  // else tokenizer.json. NotFound when it has neither.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> LoadDir(
      const std::string& dir);

  // Text -> ids. Added tokens are matched anywhere in the text (leftmost,
  // then longest). Invalid UTF-8 is encoded byte-wise, never rejected.
  virtual std::vector<int32_t> Encode(absl::string_view text) const = 0;

  // Ids -> bytes (may be invalid UTF-8 mid-sequence). Unknown ids are an
  // error naming the id.
  virtual absl::StatusOr<std::string> Decode(
      const std::vector<int32_t>& ids) const = 0;

  virtual int32_t vocab_size() const = 0;

  // Id of an added token by its literal content, or -1.
  virtual int32_t AddedTokenId(absl::string_view content) const = 0;

  // Ids that end a generation (end of text / end of message).
  virtual std::vector<int32_t> StopIds() const = 0;
};

}  // namespace flotilla::tokenizer

#endif  // FLOTILLA_SHARED_TOKENIZER_TOKENIZER_H_
