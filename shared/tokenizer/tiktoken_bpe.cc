#include "shared/tokenizer/tiktoken_bpe.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "shared/base/status_macros.h"

namespace flotilla::tokenizer {
namespace {

// Prefixes a status message with the file it came from, keeping the code.
absl::Status InFile(const absl::Status& status, absl::string_view path) {
  return absl::Status(status.code(),
                      absl::StrCat(path, ": ", status.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<TiktokenBpe>> TiktokenBpe::Create(
    std::vector<RankEntry> ranks, std::unique_ptr<Pretokenizer> pretokenizer,
    std::vector<AddedToken> added_tokens) {
  if (pretokenizer == nullptr) {
    return absl::InvalidArgumentError("no pre-tokenizer");
  }
  int32_t max_id = -1;
  for (const RankEntry& entry : ranks) {
    if (entry.bytes.empty() || entry.rank < 0 || entry.rank > kMaxTokenId) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad rank entry ", entry.rank));
    }
    max_id = std::max(max_id, entry.rank);
  }
  for (const AddedToken& token : added_tokens) {
    if (token.id < 0 || token.id > kMaxTokenId) {
      return absl::InvalidArgumentError(
          absl::StrCat("added token id ", token.id, " out of range"));
    }
    max_id = std::max(max_id, token.id);
  }
  std::unique_ptr<TiktokenBpe> bpe(new TiktokenBpe());
  bpe->ranks_.reserve(ranks.size());
  bpe->decoder_.resize(max_id + 1);  // Tokens are non-empty: "" is unused.
  for (RankEntry& entry : ranks) {
    std::string& slot = bpe->decoder_[entry.rank];
    if (!slot.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("duplicate rank ", entry.rank));
    }
    slot = entry.bytes;
    if (!bpe->ranks_.emplace(std::move(entry.bytes), entry.rank).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("duplicate token bytes for rank ", entry.rank));
    }
  }
  for (int b = 0; b < 256; ++b) {
    if (!bpe->ranks_.contains(std::string(1, static_cast<char>(b)))) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "no rank for single byte 0x%02X; byte-level BPE needs all 256", b));
    }
  }
  for (AddedToken& token : added_tokens) {
    std::string& slot = bpe->decoder_[token.id];
    if (!slot.empty() && bpe->added_.ContentOf(token.id) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "added token '", token.content, "' reuses BPE rank ", token.id));
    }
    if (slot.empty()) slot = token.content;
    FLOTILLA_RETURN_IF_ERROR(
        bpe->added_.Add(std::move(token.content), token.id));
  }
  bpe->vocab_size_ = max_id + 1;
  bpe->pretokenizer_ = std::move(pretokenizer);
  return bpe;
}

absl::StatusOr<std::unique_ptr<TiktokenBpe>> TiktokenBpe::Load(
    const std::string& model_path, const std::string& config_path,
    std::unique_ptr<Pretokenizer> pretokenizer) {
  FLOTILLA_ASSIGN_OR_RETURN(const std::string model,
                            ReadFileToString(model_path));
  FLOTILLA_ASSIGN_OR_RETURN(std::vector<RankEntry> ranks,
                            ParseTiktokenModel(model, model_path));
  std::vector<AddedToken> added;
  if (!config_path.empty()) {
    FLOTILLA_ASSIGN_OR_RETURN(const std::string config,
                              ReadFileToString(config_path));
    FLOTILLA_ASSIGN_OR_RETURN(added, ParseAddedTokens(config, config_path));
  }
  absl::StatusOr<std::unique_ptr<TiktokenBpe>> bpe =
      Create(std::move(ranks), std::move(pretokenizer), std::move(added));
  if (!bpe.ok()) {
    // Create cannot tell which file a clash came from; name both.
    const std::string files =
        config_path.empty() ? model_path
                            : absl::StrCat(model_path, " + ", config_path);
    return InFile(bpe.status(), files);
  }
  return bpe;
}

void TiktokenBpe::EncodeOrdinary(absl::string_view text,
                                 std::vector<int32_t>* out) const {
  pretokenizer_->Split(text, [&](absl::string_view piece) {
    BytePairEncode(piece, ranks_, out);
  });
}

std::vector<int32_t> TiktokenBpe::EncodeOrdinary(absl::string_view text) const {
  std::vector<int32_t> ids;
  EncodeOrdinary(text, &ids);
  return ids;
}

std::vector<int32_t> TiktokenBpe::Encode(absl::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  size_t pos = 0;
  while (pos < text.size()) {
    const std::optional<AddedTokenMatcher::Match> match =
        added_.FindFirst(text, pos);
    const size_t stop = match ? match->pos : text.size();
    EncodeOrdinary(text.substr(pos, stop - pos), &ids);
    if (!match) break;
    ids.push_back(match->id);
    pos = match->pos + match->length;
  }
  return ids;
}

absl::StatusOr<std::string> TiktokenBpe::Decode(
    const std::vector<int32_t>& ids) const {
  std::string out;
  for (const int32_t id : ids) {
    if (id < 0 || id >= vocab_size_ || decoder_[id].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown token id ", id));
    }
    out += decoder_[id];
  }
  return out;
}

int32_t TiktokenBpe::AddedTokenId(absl::string_view content) const {
  return added_.IdOf(content);
}

std::vector<int32_t> TiktokenBpe::StopIds() const {
  const int32_t end = AddedTokenId("<|end_of_msg|>");
  if (end < 0) return {};
  return {end};
}

}  // namespace flotilla::tokenizer
