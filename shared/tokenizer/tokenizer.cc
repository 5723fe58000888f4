#include "shared/tokenizer/tokenizer.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/tokenizer/hf_tokenizer.h"
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

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::LoadDir(
    const std::string& dir) {
  if (access((dir + "/tiktoken.model").c_str(), F_OK) == 0)
    return LoadKimi(dir);
  if (access((dir + "/tokenizer.json").c_str(), F_OK) == 0) {
    FLOTILLA_ASSIGN_OR_RETURN(std::unique_ptr<HfTokenizer> hf,
                              HfTokenizer::Load(dir));
    return std::unique_ptr<Tokenizer>(std::move(hf));
  }
  return absl::NotFoundError(absl::StrCat(
      dir, " has no tokenizer (tiktoken.model or tokenizer.json)"));
}

}  // namespace flotilla::tokenizer
