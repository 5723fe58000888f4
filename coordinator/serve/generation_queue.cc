#include "coordinator/serve/generation_queue.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "coordinator/speculate.h"
#include "shared/base/elapsed.h"

namespace flotilla::coordinator::serve {

struct GenerationQueue::Running {
  GenerationJob job;
  std::unique_ptr<ModelSequence> sequence;
  Sampler sampler;
  std::vector<int32_t> prompt_left;  // prompt ids not yet fed
  std::vector<int32_t> next;         // what this step feeds
  std::vector<int32_t> fed;          // every id the sequence's state holds
  GenerateResult result;

  explicit Running(GenerationJob j)
      : job(std::move(j)), sampler(job.options.sampler, job.prompt) {}
};

GenerationQueue::GenerationQueue(LanguageModel* model,
                                 const QueueOptions& options)
    : model_(model),
      max_queue_(std::max<size_t>(1, options.max_queue)),
      max_batch_(std::max<size_t>(1, options.max_batch)),
      prefill_chunk_(options.prefill_chunk),
      drafter_(options.drafter),
      draft_tokens_(options.draft_tokens),
      on_step_(options.on_step),
      on_idle_(options.on_idle) {
  if (options.prefix_cache_bytes > 0) {
    cache_ = std::make_unique<PrefixCache>(options.prefix_cache_bytes);
  }
  store_ = options.prefix_store;
  thread_ = std::thread([this] { Loop(); });
}

GenerationQueue::~GenerationQueue() {
  Shutdown();
  thread_.join();
}

absl::Status GenerationQueue::Submit(GenerationJob job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      return absl::UnavailableError("the server is shutting down");
    }
    if (jobs_.size() >= max_queue_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the request queue is full (", max_queue_, " waiting); retry later"));
    }
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
  return absl::OkStatus();
}

void GenerationQueue::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
}

size_t GenerationQueue::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_.size();
}

uint64_t GenerationQueue::prefix_hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return prefix_hits_;
}

uint64_t GenerationQueue::reused_tokens() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reused_tokens_;
}

uint64_t GenerationQueue::cancelled_jobs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

size_t GenerationQueue::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_;
}

size_t GenerationQueue::widest_step() const {
  std::lock_guard<std::mutex> lock(mu_);
  return widest_step_;
}

bool GenerationQueue::Admit(std::vector<std::unique_ptr<Running>>* running) {
  std::vector<GenerationJob> admitted;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (running->empty()) {
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return false;  // stopping and drained
    }
    while (running->size() + admitted.size() < max_batch_ && !jobs_.empty()) {
      admitted.push_back(std::move(jobs_.front()));
      jobs_.pop_front();
    }
  }
  for (GenerationJob& job : admitted) {
    absl::Status s = Interrupted(job);
    if (s.ok()) s = CheckGenerateRequest(job.prompt, job.options);
    if (s.ok() && job.options.max_tokens < 1) {
      s = absl::InvalidArgumentError("max_tokens must be >= 1");
    }
    if (!s.ok()) {
      if (absl::IsCancelled(s)) {
        std::lock_guard<std::mutex> lock(mu_);
        ++cancelled_;
      }
      if (job.on_done) job.on_done(s);
      continue;
    }
    auto r = std::make_unique<Running>(std::move(job));
    size_t reused = 0;
    if (cache_ != nullptr) r->sequence = cache_->Find(r->job.prompt, &reused);
    if (store_ != nullptr) {
      // The disk may hold a longer prefix (kept before a restart).
      size_t on_disk = 0;
      std::unique_ptr<ModelSequence> state =
          store_->Find(r->job.prompt, reused, *model_, &on_disk);
      if (state != nullptr) {
        r->sequence = std::move(state);
        reused = on_disk;
      }
    }
    if (r->sequence == nullptr) r->sequence = model_->StartSequence();
    r->result.cached_prompt_tokens = reused;
    r->fed.assign(r->job.prompt.begin(), r->job.prompt.begin() + reused);
    r->prompt_left.assign(r->job.prompt.begin() + reused, r->job.prompt.end());
    if (reused > 0) {
      std::lock_guard<std::mutex> lock(mu_);
      ++prefix_hits_;
      reused_tokens_ += reused;
      ++pending_report_.prefix_hits;
      pending_report_.reused_tokens += reused;
    }
    r->result.finish_reason = "length";
    running->push_back(std::move(r));
  }
  return true;
}

absl::Status GenerationQueue::Interrupted(const GenerationJob& job) {
  if (job.cancelled && job.cancelled()) {
    return absl::CancelledError("the client went away");
  }
  if (job.deadline != absl::InfiniteFuture() && absl::Now() > job.deadline) {
    return absl::DeadlineExceededError(
        "the request ran past its time limit (--request-timeout-s)");
  }
  return absl::OkStatus();
}

void GenerationQueue::Step(std::vector<std::unique_ptr<Running>>* running) {
  // A job whose client left or whose time is up leaves before the step,
  // freeing its state at once.
  std::vector<std::unique_ptr<Running>> live;
  for (auto& r : *running) {
    if (absl::Status s = Interrupted(r->job); !s.ok()) {
      if (absl::IsCancelled(s)) {
        std::lock_guard<std::mutex> lock(mu_);
        ++cancelled_;
      }
      r->sequence.reset();
      if (r->job.on_done) r->job.on_done(s);
    } else {
      live.push_back(std::move(r));
    }
  }
  *running = std::move(live);
  if (running->empty()) {
    if (on_idle_) on_idle_(waiting());
    return;
  }
  std::vector<ModelSequence*> sequences;
  std::vector<std::vector<int32_t>> ids;
  // Decoding jobs with a drafter check its guesses in this step's forward
  // (speculate.h): every row's logits for them.
  const size_t n = running->size();
  std::vector<SpeculativePlan> plans(n);
  std::vector<bool> speculates(n, false), all_rows(n, false);
  // Rows whose prompt ends in this step and whose state is kept there too
  // (KeepPromptEnd).
  std::vector<bool> keeps_prompt(n, false);
  std::vector<std::vector<int32_t>> histories(n);
  size_t prompt_fed = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto& r = (*running)[i];
    sequences.push_back(r->sequence.get());
    if (Speculates(*r)) {
      histories[i] = r->fed;
      histories[i].push_back(r->next[0]);
      plans[i] = PlanSpeculativePass(histories[i], Options(*r), *drafter_,
                                     r->sequence.get(), r->result);
      speculates[i] = true;
      all_rows[i] = !plans[i].drafts.empty();
      ids.push_back(plans[i].ids);
      continue;
    }
    if (!r->prompt_left.empty()) {
      const size_t take = prefill_chunk_ == 0
                              ? r->prompt_left.size()
                              : std::min(prefill_chunk_, r->prompt_left.size());
      r->next.assign(r->prompt_left.begin(), r->prompt_left.begin() + take);
      r->prompt_left.erase(r->prompt_left.begin(),
                           r->prompt_left.begin() + take);
      prompt_fed += take;
      keeps_prompt[i] = r->prompt_left.empty() && WantsPromptEnd(*r, take);
    }
    ids.push_back(std::move(r->next));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    widest_step_ = std::max(widest_step_, running->size());
  }
  StepReport report = pending_report_;
  pending_report_ = StepReport();
  report.sequences = sequences.size();
  report.prompt_tokens = prompt_fed;
  std::vector<std::vector<float>> logits;
  const auto forward_start = std::chrono::steady_clock::now();
  const absl::Status s =
      model_->ForwardBatchRows(sequences, ids, all_rows, &logits);
  report.seconds = base::SecondsSince(forward_start);
  if (!s.ok()) {
    for (auto& r : *running) {
      if (r->job.on_done) r->job.on_done(s);
    }
    running->clear();
    return;
  }
  const int vocab = model_->vocab_size();
  std::vector<std::unique_ptr<Running>> still;
  // Jobs that end in this step answer only after the step is reported, so a
  // client that scrapes /metrics after its reply sees its last token counted.
  std::vector<std::unique_ptr<Running>> finished;
  for (size_t i = 0; i < running->size(); ++i) {
    Running& r = *(*running)[i];
    if (speculates[i]) {
      absl::Status failed;
      if (FinishSpeculation(r, plans[i], std::move(histories[i]), logits[i],
                            &report, &failed)) {
        if (!failed.ok()) {
          if (r.job.on_done) r.job.on_done(failed);
          continue;  // ended with its error
        }
        finished.push_back(std::move((*running)[i]));
      } else {
        still.push_back(std::move((*running)[i]));
      }
      continue;
    }
    r.fed.insert(r.fed.end(), ids[i].begin(), ids[i].end());
    if (keeps_prompt[i]) KeepPromptEnd(r);
    if (!r.prompt_left.empty()) {  // still prefilling: no token yet
      still.push_back(std::move((*running)[i]));
      continue;
    }
    ++report.tokens;
    if (r.job.on_logits) r.job.on_logits(logits[i].data(), vocab);
    // Generate's own decision, so the request ends where Generate would.
    const bool done = AcceptToken(logits[i].data(), vocab, r.job.options,
                                  &r.sampler, r.job.on_token, &r.result);
    if (done) {
      Keep(r);
      finished.push_back(std::move((*running)[i]));
    } else {
      r.next = {r.result.generated_ids.back()};
      still.push_back(std::move((*running)[i]));
    }
  }
  *running = std::move(still);
  if (on_step_) {
    report.running = running->size();
    report.waiting = waiting();
    on_step_(report);
  }
  for (auto& r : finished) {
    if (r->job.on_done) r->job.on_done(std::move(r->result));
  }
}

void GenerationQueue::Keep(Running& r) {
  r.result.state_bytes = r.sequence->bytes();
  // Kept for a later turn, or freed now, not after the batch.
  if (store_ != nullptr) store_->Put(r.fed, *r.sequence);
  if (cache_ != nullptr) {
    // A copy holds no spare capacity (the caches grew by appending).
    cache_->Put(std::move(r.fed), r.sequence->Clone());
  }
  r.sequence.reset();
}

bool GenerationQueue::WantsPromptEnd(Running& r, size_t take) {
  if (cache_ == nullptr && store_ == nullptr) return false;
  // A state that can go back anywhere is cut back from its end instead.
  if (r.sequence->RewindsAnywhere()) return false;
  // Kept one short of the prompt's end, so that the same prompt again (which
  // must run its last id for logits) resumes from it as well as a next turn;
  // not when that is no more than the cache served already.
  const size_t kept = r.fed.size() + take - 1;
  if (kept == 0 || kept <= r.result.cached_prompt_tokens) return false;
  // The last id will be dropped again right after this step's forward.
  return r.sequence->PrepareUndo(take);
}

void GenerationQueue::KeepPromptEnd(Running& r) {
  // The row goes on from a copy; the state itself goes back one position
  // (through the undo records PrepareUndo made) and is kept.
  std::unique_ptr<ModelSequence> going_on = r.sequence->Clone();
  if (!r.sequence->Truncate(r.fed.size() - 1)) return;  // keep nothing
  std::vector<int32_t> ids(r.fed.begin(), r.fed.end() - 1);
  if (store_ != nullptr) store_->Put(ids, *r.sequence);
  if (cache_ != nullptr) cache_->Put(std::move(ids), r.sequence->Clone());
  r.sequence = std::move(going_on);
}

bool GenerationQueue::Speculates(const Running& r) const {
  // Log-probabilities come per token from the plain path's logits.
  return drafter_ != nullptr && r.prompt_left.empty() && r.next.size() == 1 &&
         !r.job.on_logits;
}

GenerateOptions GenerationQueue::Options(const Running& r) const {
  GenerateOptions options = r.job.options;
  options.draft_tokens = draft_tokens_;
  return options;
}

bool GenerationQueue::FinishSpeculation(Running& r, SpeculativePlan& plan,
                                        std::vector<int32_t> history,
                                        const std::vector<float>& logits,
                                        StepReport* report,
                                        absl::Status* failed) {
  const size_t before = r.result.generated_ids.size();
  const int drafted = r.result.drafted_tokens;
  const int accepted = r.result.accepted_tokens;
  absl::StatusOr<bool> done =
      FinishSpeculativePass(*model_, plan, logits, Options(r), *drafter_,
                            &r.sampler, r.job.on_token, &r.sequence, &r.result);
  if (!done.ok()) {
    *failed = done.status();
    r.sequence.reset();
    return true;
  }
  const std::vector<int32_t>& out = r.result.generated_ids;
  report->tokens += out.size() - before;
  report->drafted += static_cast<size_t>(r.result.drafted_tokens - drafted);
  report->accepted += static_cast<size_t>(r.result.accepted_tokens - accepted);
  // The state holds the history and the kept guesses; a pass that ended
  // early may hold guesses past the end, dropped before the state is kept.
  r.fed = std::move(history);
  r.fed.insert(r.fed.end(), out.begin() + before, out.end() - 1);
  if (!*done) {
    r.next = {out.back()};
    return false;
  }
  if (r.sequence->Truncate(r.fed.size())) {
    Keep(r);
  } else {
    r.result.state_bytes = r.sequence->bytes();
    r.sequence.reset();  // not what `fed` says: not kept
  }
  return true;
}

void GenerationQueue::Loop() {
  std::vector<std::unique_ptr<Running>> running;
  while (Admit(&running)) {
    if (!running.empty()) Step(&running);
    std::lock_guard<std::mutex> lock(mu_);
    running_ = running.size();
  }
}

}  // namespace flotilla::coordinator::serve
