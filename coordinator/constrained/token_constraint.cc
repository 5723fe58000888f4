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
    out->sorted_.push_back(id);
  }
  const std::vector<std::string>& p = out->pieces_;
  std::sort(out->sorted_.begin(), out->sorted_.end(),
            [&p](int32_t a, int32_t b) {
              return p[a] != p[b] ? p[a] < p[b] : a < b;
            });
  out->shared_.resize(out->sorted_.size(), 0);
  for (size_t i = 0; i < out->sorted_.size(); ++i) {
    const std::string& here = p[out->sorted_[i]];
    out->longest_ = std::max(out->longest_, here.size());
    if (i == 0) continue;
    const std::string& before = p[out->sorted_[i - 1]];
    size_t n = 0;
    while (n < here.size() && n < before.size() && n < 65535 &&
           here[n] == before[n]) {
      ++n;
    }
    out->shared_[i] = static_cast<uint16_t>(n);
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
  // The pieces in byte order: each is fed only past what it shares with
  // the one before (states_[d] holds the matcher after d bytes), and a
  // byte the matcher refuses rules out every piece that shares it. The
  // same verdicts as feeding each piece alone: the matcher's state is a
  // function of the bytes fed.
  if (states_.size() < pieces_->longest() + 1) {
    states_.resize(pieces_->longest() + 1, matcher_);
  }
  states_[0] = matcher_;
  size_t valid = 0;  // states_[0..valid] belong to the previous piece
  size_t dead = std::numeric_limits<size_t>::max();  // its refused byte
  const std::vector<int32_t>& order = pieces_->sorted();
  const std::vector<uint16_t>& shared = pieces_->shared();
  for (size_t k = 0; k < order.size(); ++k) {
    const int32_t id = order[k];
    const std::string& p = pieces_->piece(id);
    const size_t common = shared[k];
    if (dead != std::numeric_limits<size_t>::max() && common > dead) {
      continue;  // it shares the refused byte
    }
    size_t d = std::min(common, valid);
    dead = std::numeric_limits<size_t>::max();
    for (; d < p.size(); ++d) {
      states_[d + 1] = states_[d];
      if (!states_[d + 1].Feed(p[d])) {
        dead = d;
        break;
      }
    }
    valid = dead != std::numeric_limits<size_t>::max() ? dead : p.size();
    if (dead != std::numeric_limits<size_t>::max() || id >= vocab) continue;
    any_valid = true;
    if (states_[p.size()].MinBytesToEnd() <= after) {
      allowed_[id] = 1;
      any_within = true;
    } else {
      over_budget.push_back(id);
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
