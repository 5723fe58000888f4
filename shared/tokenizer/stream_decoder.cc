#include "shared/tokenizer/stream_decoder.h"

#include "shared/base/status_macros.h"
#include "shared/tokenizer/utf8.h"

namespace flotilla::tokenizer {

absl::StatusOr<std::string> StreamDecoder::Next(int32_t id) {
  ids_.push_back(id);
  const std::vector<int32_t> printed(ids_.begin() + prefix_,
                                     ids_.begin() + read_);
  const std::vector<int32_t> window(ids_.begin() + prefix_, ids_.end());
  FLOTILLA_ASSIGN_OR_RETURN(std::string before, tokenizer_->Decode(printed));
  FLOTILLA_ASSIGN_OR_RETURN(std::string after, tokenizer_->Decode(window));
  if (after.size() <= before.size() || IncompleteUtf8Tail(after) > 0) {
    return std::string();
  }
  // The window starts one printed token back so that decoders which treat
  // the first token specially (strip a leading space) see a neighbour.
  prefix_ = read_;
  read_ = ids_.size();
  return after.substr(before.size());
}

void StreamDecoder::Commit() {
  read_ = ids_.size();
  prefix_ = read_ > 0 ? read_ - 1 : 0;
}

absl::StatusOr<std::string> StreamDecoder::Finish() {
  const std::vector<int32_t> printed(ids_.begin() + prefix_,
                                     ids_.begin() + read_);
  const std::vector<int32_t> window(ids_.begin() + prefix_, ids_.end());
  FLOTILLA_ASSIGN_OR_RETURN(std::string before, tokenizer_->Decode(printed));
  FLOTILLA_ASSIGN_OR_RETURN(std::string after, tokenizer_->Decode(window));
  prefix_ = read_ = ids_.size();
  if (after.size() <= before.size()) return std::string();
  return after.substr(before.size());
}

}  // namespace flotilla::tokenizer
