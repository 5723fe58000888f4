#include "coordinator/serve/completion_job.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace flotilla::coordinator::serve {

absl::Status CheckPromptIds(const std::vector<int32_t>& ids, int vocab_size,
                            int max_prompt_tokens) {
  if (ids.empty())
    return absl::InvalidArgumentError("the prompt has no tokens");
  if (static_cast<int64_t>(ids.size()) > max_prompt_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("the prompt is ", ids.size(),
                                                   " tokens; the limit is ",
                                                   max_prompt_tokens));
  }
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token id ", id, " is outside the vocabulary of ", vocab_size));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Completion>> Completion::Start(
    GenerationQueue* queue, const tokenizer::Tokenizer* tokenizer,
    CompletionSpec spec) {
  auto c = std::shared_ptr<Completion>(new Completion());
  c->prompt_tokens_ = spec.prompt.size();
  if (tokenizer != nullptr) {
    c->decoder_ = std::make_unique<tokenizer::StreamDecoder>(tokenizer);
    for (int32_t id : spec.prompt) (void)c->decoder_->Next(id);
  }
  c->stop_ = std::make_unique<StopText>(std::move(spec.stop));
  GenerationJob job;
  job.prompt = std::move(spec.prompt);
  job.options.max_tokens = spec.max_tokens;
  job.options.sampler = spec.sampler;
  job.options.stop_ids = std::move(spec.stop_ids);
  if (tokenizer != nullptr) {
    for (int32_t id : tokenizer->StopIds()) job.options.stop_ids.push_back(id);
  }
  // The job holds the completion alive until it ends, whoever else lets go.
  job.on_token = [c](int32_t id) { return c->OnToken(id); };
  job.on_done = [c](absl::StatusOr<GenerateResult> r) {
    c->OnDone(std::move(r));
  };
  if (absl::Status s = queue->Submit(std::move(job)); !s.ok()) return s;
  return c;
}

bool Completion::OnToken(int32_t id) {
  if (cancelled_) return false;
  std::string piece;
  if (decoder_ != nullptr) {
    if (auto p = decoder_->Next(id); p.ok()) piece = *std::move(p);
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++completion_tokens_;
  pending_.ids.push_back(id);
  pending_.text += stop_->Feed(piece);
  cv_.notify_all();
  if (stop_->stopped()) {
    finish_reason_ = "stop";
    return false;
  }
  return true;
}

void Completion::OnDone(absl::StatusOr<GenerateResult> r) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!r.ok()) {
    status_ = r.status();
  } else if (!stop_->stopped()) {
    finish_reason_ = r->finish_reason;
    std::string rest;
    if (decoder_ != nullptr) {
      if (auto p = decoder_->Finish(); p.ok()) rest = *std::move(p);
    }
    pending_.text += stop_->Feed(rest) + stop_->Flush();
  }
  done_ = true;
  cv_.notify_all();
}

bool Completion::Take(CompletionPiece* piece) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] {
    return done_ || !pending_.text.empty() || !pending_.ids.empty();
  });
  *piece = std::move(pending_);
  pending_ = CompletionPiece();
  return done_;
}

absl::Status Completion::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

std::string Completion::finish_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finish_reason_;
}

size_t Completion::completion_tokens() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completion_tokens_;
}

}  // namespace flotilla::coordinator::serve
