#include "coordinator/constrained/token_constraint.h"

#include <algorithm>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace flotilla::coordinator::constrained {

namespace {

// How many leading bytes each piece of `order` shares with the one before.
std::vector<uint16_t> SharedPrefixes(const std::vector<std::string>& p,
                                     const std::vector<int32_t>& order) {
  std::vector<uint16_t> shared(order.size(), 0);
  for (size_t i = 1; i < order.size(); ++i) {
    const std::string& here = p[order[i]];
    const std::string& before = p[order[i - 1]];
    size_t n = 0;
    while (n < here.size() && n < before.size() && n < 65535 &&
           here[n] == before[n]) {
      ++n;
    }
    shared[i] = static_cast<uint16_t>(n);
  }
  return shared;
}

// The characters of `piece` when every byte is plain string content for
// JsonMatcher::StringStep (no '"', '\\' or byte below 0x20; UTF-8
// sequences whole and valid by its rules), else -1.
int32_t PlainChars(const std::string& piece) {
  int32_t chars = 0;
  for (size_t i = 0; i < piece.size();) {
    const unsigned char u = static_cast<unsigned char>(piece[i]);
    if (u == '"' || u == '\\' || u < 0x20) return -1;
    int follow = 0;
    unsigned char lo = 0x80, hi = 0xbf;
    if (u < 0x80) {
      follow = 0;
    } else if (u >= 0xc2 && u <= 0xdf) {
      follow = 1;
    } else if (u >= 0xe0 && u <= 0xef) {
      follow = 2;
      if (u == 0xe0) lo = 0xa0;
      if (u == 0xed) hi = 0x9f;
    } else if (u >= 0xf0 && u <= 0xf4) {
      follow = 3;
      if (u == 0xf0) lo = 0x90;
      if (u == 0xf4) hi = 0x8f;
    } else {
      return -1;
    }
    if (i + follow >= piece.size() && follow > 0) {
      return -1;  // a sequence the piece cuts
    }
    for (int k = 1; k <= follow; ++k) {
      const unsigned char c = static_cast<unsigned char>(piece[i + k]);
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xbf)) return -1;
    }
    i += 1 + follow;
    ++chars;
  }
  return chars;
}

}  // namespace

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
  out->plain_chars_.assign(vocab, -1);
  for (int32_t id : out->sorted_) {
    out->plain_chars_[id] = PlainChars(p[id]);
    out->longest_ = std::max(out->longest_, p[id].size());
    if (out->plain_chars_[id] < 0) out->others_.push_back(id);
  }
  out->shared_ = SharedPrefixes(p, out->sorted_);
  out->others_shared_ = SharedPrefixes(p, out->others_);
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
  int64_t count = 0, min_length = 0, max_length = -1;
  if (matcher_.InPlainString(&count, &min_length, &max_length)) {
    // Inside a string: a plain piece's verdict is arithmetic on its
    // character count (JsonMatcher::InPlainString says why it is the
    // matcher's); only the other pieces are fed.
    const int64_t need = matcher_.MinBytesToEnd();
    const int64_t owed = std::max<int64_t>(0, min_length - count);
    for (int32_t id : pieces_->sorted()) {
      const int32_t chars = pieces_->plain_chars(id);
      if (chars < 0 || id >= vocab) continue;
      if (max_length >= 0 && count + chars > max_length) continue;
      any_valid = true;
      const int64_t left = std::max<int64_t>(0, owed - chars);
      if (need - (owed - left) <= after) {
        allowed_[id] = 1;
        any_within = true;
      } else {
        over_budget.push_back(id);
      }
    }
    Walk(pieces_->others(), pieces_->others_shared(), vocab, after, &any_valid,
         &any_within, &over_budget);
  } else {
    Walk(pieces_->sorted(), pieces_->shared(), vocab, after, &any_valid,
         &any_within, &over_budget);
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

void JsonConstraint::Walk(const std::vector<int32_t>& order,
                          const std::vector<uint16_t>& shared, int vocab,
                          int64_t after, bool* any_valid, bool* any_within,
                          std::vector<int32_t>* over_budget) {
  // The pieces in byte order: each is fed only past what it shares with
  // the one before (states_[d] holds the matcher after d bytes), and a
  // byte the matcher refuses rules out every piece that shares it. The
  // same verdicts as feeding each piece alone: the matcher's state is a
  // function of the bytes fed.
  if (states_.size() < pieces_->longest() + 1) {
    states_.resize(pieces_->longest() + 1, matcher_);
  }
  states_[0] = matcher_;
  constexpr size_t kNone = std::numeric_limits<size_t>::max();
  size_t valid = 0;     // states_[0..valid] belong to the previous piece
  size_t dead = kNone;  // its refused byte
  for (size_t k = 0; k < order.size(); ++k) {
    const int32_t id = order[k];
    const std::string& p = pieces_->piece(id);
    const size_t common = k == 0 ? 0 : shared[k];
    if (dead != kNone && common > dead) continue;  // shares the refused byte
    size_t d = std::min(common, valid);
    dead = kNone;
    for (; d < p.size(); ++d) {
      states_[d + 1] = states_[d];
      if (!states_[d + 1].Feed(p[d])) {
        dead = d;
        break;
      }
    }
    valid = dead != kNone ? dead : p.size();
    if (dead != kNone || id >= vocab) continue;
    *any_valid = true;
    if (states_[p.size()].MinBytesToEnd() <= after) {
      allowed_[id] = 1;
      *any_within = true;
    } else {
      over_budget->push_back(id);
    }
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
