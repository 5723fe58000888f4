#include "coordinator/constrained/token_constraint.h"

#include <algorithm>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace flotilla::coordinator::constrained {

absl::StatusOr<std::shared_ptr<const TokenPieces>> TokenPieces::Build(
    const tokenizer::Tokenizer& tokenizer) {
  auto out = std::make_shared<TokenPieces>();
  // Decoded after an anchor, a token's text keeps the leading space a
  // decoder strips at the start of a text.
  const std::vector<int32_t> anchor = tokenizer.Encode("a");
  absl::StatusOr<std::string> base = tokenizer.Decode(anchor);
  if (anchor.empty() || !base.ok()) {
    return absl::FailedPreconditionError(
        "constrained decoding: the tokenizer cannot encode and decode \"a\"");
  }
  const int32_t vocab = tokenizer.vocab_size();
  out->pieces_.resize(vocab);
  out->stop_ids_ = tokenizer.StopIds();
  std::vector<int32_t> ids = anchor;
  ids.push_back(0);
  for (int32_t id = 0; id < vocab; ++id) {
    if (std::find(out->stop_ids_.begin(), out->stop_ids_.end(), id) !=
        out->stop_ids_.end()) {
      continue;
    }
    ids.back() = id;
    absl::StatusOr<std::string> text = tokenizer.Decode(ids);
    if (!text.ok() || !absl::StartsWith(*text, *base) ||
        text->size() == base->size()) {
      continue;
    }
    out->pieces_[id] = text->substr(base->size());
    out->by_first_byte_[static_cast<unsigned char>(out->pieces_[id][0])]
        .push_back(id);
  }
  return std::shared_ptr<const TokenPieces>(std::move(out));
}

JsonConstraint::JsonConstraint(std::shared_ptr<const CompiledSchema> schema,
                               std::shared_ptr<const TokenPieces> pieces)
    : schema_(std::move(schema)),
      pieces_(std::move(pieces)),
      matcher_(schema_.get()) {}

void JsonConstraint::Mask(float* logits, int vocab, int remaining) {
  allowed_.assign(vocab, 0);
  // Tokens after this one: each adds at least one byte, and every byte the
  // closing needs exists as a one-byte token (byte fallback / byte-level).
  const int64_t after = std::max(0, remaining - 1);
  bool any_within = false, any_valid = false;
  std::vector<int32_t> over_budget;
  for (int b = 0; b < 256; ++b) {
    const std::vector<int32_t>& ids = pieces_->starting_with(b);
    if (ids.empty()) continue;
    JsonMatcher first = matcher_;
    if (!first.Feed(static_cast<char>(b))) continue;
    for (int32_t id : ids) {
      if (id >= vocab) continue;
      JsonMatcher m = first;
      const std::string& p = pieces_->piece(id);
      if (!m.FeedAll(absl::string_view(p).substr(1))) continue;
      any_valid = true;
      if (m.MinBytesToEnd() <= after) {
        allowed_[id] = 1;
        any_within = true;
      } else {
        over_budget.push_back(id);
      }
    }
  }
  if (!any_within) {
    // No token closes in time: keep to valid text (the output may then be
    // cut at max_tokens).
    for (int32_t id : over_budget) allowed_[id] = 1;
  }
  if (matcher_.CanEnd() || !any_valid) {
    for (int32_t id : pieces_->stop_ids()) {
      if (id < vocab) allowed_[id] = 1;
    }
  }
  const float kBanned = -std::numeric_limits<float>::infinity();
  for (int id = 0; id < vocab; ++id) {
    if (!allowed_[id]) logits[id] = kBanned;
  }
}

bool JsonConstraint::Accept(int32_t id) {
  if (id < 0 || id >= pieces_->vocab_size() || pieces_->piece(id).empty()) {
    return true;  // a stop token (or nothing fit): the output ends here
  }
  const std::string& p = pieces_->piece(id);
  if (!matcher_.FeedAll(p)) return true;
  return matcher_.Done();
}

}  // namespace flotilla::coordinator::constrained
