#include "shared/tokenizer/tokenizer.h"

#include <utility>

#include "shared/base/status_macros.h"
#include "shared/tokenizer/pretokenizer.h"
#include "shared/tokenizer/tiktoken_bpe.h"

namespace flotilla::tokenizer {

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::LoadKimi(
    const std::string& dir) {
  FLOTILLA_ASSIGN_OR_RETURN(std::unique_ptr<Pretokenizer> pretokenizer,
                            Pretokenizer::Kimi());
  // The config is required: without it [BOS] and the chat markers would be
  // encoded as plain text.
  FLOTILLA_ASSIGN_OR_RETURN(
      std::unique_ptr<TiktokenBpe> bpe,
      TiktokenBpe::Load(dir + "/tiktoken.model", dir + "/tokenizer_config.json",
                        std::move(pretokenizer)));
  return std::unique_ptr<Tokenizer>(std::move(bpe));
}

}  // namespace flotilla::tokenizer
