#include "shared/tokenizer/stream_decoder.h"

#include "shared/base/status_macros.h"

namespace flotilla::tokenizer {

size_t IncompleteUtf8Tail(const std::string& text) {
  // A character is at most 4 bytes: look back at most 3 for its lead byte.
  for (size_t back = 1; back <= 3 && back <= text.size(); ++back) {
    const auto c = static_cast<unsigned char>(text[text.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

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
