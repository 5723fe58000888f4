#include "coordinator/serve/completion_job.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace flotilla::coordinator::serve {

absl::Status CheckCompletionSpec(const CompletionSpec& spec, int vocab_size,
                                 const RequestLimits& limits) {
  const std::vector<int32_t>& ids = spec.prompt;
  if (ids.empty())
    return absl::InvalidArgumentError("the prompt has no tokens");
  if (static_cast<int64_t>(ids.size()) > limits.max_prompt_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("the prompt is ", ids.size(), " tokens; the limit is ",
                     limits.max_prompt_tokens, " (", limits.prompt_limit_flag,
                     " raises it)"));
  }
  if (spec.max_tokens < 1 || spec.max_tokens > limits.max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("max_tokens must be in 1..",
                                                   limits.max_tokens, ", got ",
                                                   spec.max_tokens));
  }
  if (static_cast<int64_t>(ids.size()) >= limits.max_context) {
    return absl::InvalidArgumentError(
        absl::StrCat("the prompt (", ids.size(),
                     " tokens) fills the context of ", limits.max_context,
                     " tokens; shorten the prompt or raise --max-context"));
  }
  if (static_cast<int64_t>(ids.size()) + spec.max_tokens > limits.max_context) {
    // FitMaxTokens caps every spec before this check; reaching here is a
    // caller that skipped it.
    return absl::InvalidArgumentError(
        absl::StrCat("the prompt (", ids.size(), " tokens) plus max_tokens (",
                     spec.max_tokens, ") exceed the context of ",
                     limits.max_context, " tokens"));
  }
  for (const auto& [id, bias] : spec.sampler.logit_bias) {
    if (id >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("logit_bias: token id ", id,
                       " is outside the vocabulary of ", vocab_size));
    }
  }
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token id ", id, " is outside the vocabulary of ", vocab_size));
    }
  }
  return absl::OkStatus();
}

void FitDefaultMaxTokens(CompletionSpec* spec, const RequestLimits& limits) {
  // Given or not, max_tokens is a cap: past the context left, generation
  // stops at the context's end with finish_reason "length".
  const int64_t room =
      limits.max_context - static_cast<int64_t>(spec->prompt.size());
  if (room >= 1 && spec->max_tokens > room) {
    spec->max_tokens = static_cast<int>(room);
  }
}

absl::StatusOr<std::shared_ptr<Completion>> Completion::Start(
    GenerationQueue* queue, const tokenizer::Tokenizer* tokenizer,
    CompletionSpec spec, ServeMetrics* metrics) {
  auto c = std::shared_ptr<Completion>(new Completion());
  c->metrics_ = metrics;
  c->started_ = absl::Now();
  c->first_token_ = c->last_token_ = absl::InfinitePast();
  c->prompt_tokens_ = spec.prompt.size();
  if (tokenizer != nullptr) {
    c->decoder_ = std::make_unique<tokenizer::StreamDecoder>(tokenizer);
    for (int32_t id : spec.prompt) (void)c->decoder_->Next(id);
    // The prompt's text is the client's; what it leaves open (a character
    // cut by its last byte token) is not part of the completion.
    c->decoder_->Commit();
  }
  c->stop_ = std::make_unique<StopText>(std::move(spec.stop));
  // Before the prompt moves into the job: the first token's text reads
  // after the prompt's last token (its leading space kept).
  c->previous_id_ = spec.prompt.empty() ? -1 : spec.prompt.back();
  GenerationJob job;
  job.prompt = std::move(spec.prompt);
  job.options.max_tokens = spec.max_tokens;
  job.options.sampler = spec.sampler;
  job.options.constraint = std::move(spec.constraint);
  job.options.stop_ids = std::move(spec.stop_ids);
  if (tokenizer != nullptr && !spec.ignore_eos) {
    for (int32_t id : tokenizer->StopIds()) job.options.stop_ids.push_back(id);
  }
  job.deadline = absl::Now() + spec.timeout;
  c->timeout_is_a_length_ = spec.timeout_is_a_length;
  c->top_logprobs_ = spec.top_logprobs;
  c->tokenizer_ = spec.tokens_as_ids ? nullptr : tokenizer;
  // The job holds the completion alive until it ends, whoever else lets go.
  job.on_token = [c](int32_t id) { return c->OnToken(id); };
  job.cancelled = [c] { return c->cancelled_.load(); };
  if (spec.top_logprobs >= 0) {
    job.on_logits = [c](const float* logits, int vocab) {
      c->OnLogits(logits, vocab);
    };
  }
  job.on_done = [c](absl::StatusOr<GenerateResult> r) {
    c->OnDone(std::move(r));
  };
  if (absl::Status s = queue->Submit(std::move(job)); !s.ok()) return s;
  return c;
}

void Completion::OnLogits(const float* logits, int vocab) {
  // log p = logit - logsumexp, summed in double from the maximum.
  const float top = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(double{logits[i]} - top);
  const double lse = top + std::log(sum);
  log_probs_.resize(vocab);
  for (int i = 0; i < vocab; ++i) {
    log_probs_[i] = static_cast<float>(logits[i] - lse);
  }
}

TokenChoice Completion::Choice(int32_t id) const {
  TokenChoice c{id, log_probs_[id], absl::StrCat("token_id:", id)};
  if (tokenizer_ == nullptr) return c;
  // The text `id` adds after the previous token: decoders strip or merge
  // at the start of a text, so a token decoded alone may lose its space.
  if (previous_id_ >= 0) {
    auto before = tokenizer_->Decode({previous_id_});
    auto both = tokenizer_->Decode({previous_id_, id});
    if (before.ok() && both.ok() && absl::StartsWith(*both, *before)) {
      c.text = both->substr(before->size());
      return c;
    }
  }
  if (auto alone = tokenizer_->Decode({id}); alone.ok()) c.text = *alone;
  return c;
}

bool Completion::OnToken(int32_t id) {
  // Cancellation is the queue's business (GenerationJob::cancelled, before
  // every step), so a cancelled job always ends as Cancelled.
  TokenLogprob lp;
  if (top_logprobs_ >= 0 && !log_probs_.empty()) {
    lp.token = Choice(id);
    std::vector<int32_t> order(log_probs_.size());
    std::iota(order.begin(), order.end(), 0);
    const size_t n = std::min<size_t>(top_logprobs_, order.size());
    std::partial_sort(order.begin(), order.begin() + n, order.end(),
                      [&](int32_t a, int32_t b) {
                        if (log_probs_[a] != log_probs_[b]) {
                          return log_probs_[a] > log_probs_[b];
                        }
                        return a < b;
                      });
    for (size_t i = 0; i < n; ++i) lp.top.push_back(Choice(order[i]));
  }
  previous_id_ = id;
  std::string piece;
  if (decoder_ != nullptr) {
    if (auto p = decoder_->Next(id); p.ok()) piece = *std::move(p);
  }
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time now = absl::Now();
  if (first_token_ == absl::InfinitePast()) {
    first_token_ = now;
  } else if (metrics_ != nullptr) {
    metrics_->InterToken(absl::ToDoubleSeconds(now - last_token_));
  }
  last_token_ = now;
  ++completion_tokens_;
  pending_.ids.push_back(id);
  if (top_logprobs_ >= 0) pending_.logprobs.push_back(std::move(lp));
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
  if (r.ok()) cached_tokens_ = r->cached_prompt_tokens;
  if (!r.ok() &&
      !(absl::IsDeadlineExceeded(r.status()) && timeout_is_a_length_)) {
    status_ = r.status();
  } else if (!stop_->stopped()) {
    // Past the server's time limit the reply ends as at max_tokens: what
    // was generated, finish_reason "length".
    finish_reason_ = r.ok() ? r->finish_reason : "length";
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

size_t Completion::cached_tokens() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_tokens_;
}

absl::Status Completion::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

std::string Completion::stop_sequence() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_ != nullptr ? stop_->matched() : std::string();
}

std::string Completion::finish_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finish_reason_;
}

size_t Completion::completion_tokens() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completion_tokens_;
}

double Completion::ttft_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (first_token_ == absl::InfinitePast()) return 0;
  return absl::ToDoubleSeconds(first_token_ - started_);
}

double Completion::elapsed_seconds() const {
  return absl::ToDoubleSeconds(absl::Now() - started_);
}

}  // namespace flotilla::coordinator::serve
