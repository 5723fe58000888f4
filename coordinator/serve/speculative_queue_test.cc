// `serve --speculate ngram`: decoding jobs check the n-gram drafter's
// guesses inside the batched step (every row's logits for them, the last
// row's for the others, ForwardBatchRows), and every job's tokens are what
// Generate gives without speculation, greedy and sampled, alone or eight at
// once; a state kept after a speculative job resumes a later request
// exactly.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/engine.h"
#include "coordinator/generate.h"
#include "coordinator/serve/completion_job.h"
#include "coordinator/serve/generation_queue.h"
#include "coordinator/speculate.h"
#include "gtest/gtest.h"
#include "shared/testing/fixture.h"
#include "shared/tokenizer/tokenizer.h"

namespace flotilla::coordinator::serve {
namespace {

struct Served {
  std::vector<int32_t> ids;
  absl::Status status;
};

absl::StatusOr<std::shared_ptr<Completion>> Start(
    GenerationQueue* queue, const tokenizer::Tokenizer* tok,
    const std::vector<int32_t>& prompt, const SamplerOptions& s,
    int max_tokens) {
  CompletionSpec spec;
  spec.prompt = prompt;
  spec.max_tokens = max_tokens;
  spec.sampler = s;
  return Completion::Start(queue, tok, spec, nullptr);
}

Served Drain(absl::StatusOr<std::shared_ptr<Completion>> c) {
  Served out;
  if (!c.ok()) {
    out.status = c.status();
    return out;
  }
  CompletionPiece piece;
  for (bool done = false; !done;) {
    done = (*c)->Take(&piece);
    out.ids.insert(out.ids.end(), piece.ids.begin(), piece.ids.end());
  }
  out.status = (*c)->status();
  return out;
}

TEST(SpeculativeQueueTest, SameTokensAloneAndInsideTheBatch) {
  const std::string dir = testutil::ModelPath("stories260k-moe");
  EngineOptions eo;
  eo.model_dir = dir;
  auto engine = OpenEngine(eo);
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto tok = tokenizer::Tokenizer::LoadDir(dir);
  ASSERT_TRUE(tok.ok()) << tok.status();
  LanguageModel& model = *(*engine)->model;
  const std::vector<std::string> texts = {
      "Lily saw a ball. Lily saw a ball. Lily saw a ball. Lily",
      "The dog ran. The dog ran. The dog",
      "One day",
      "Tom had a red ball",
      "The sun was hot",
      "A big cat",
      "Sue liked to sing",
      "Lily"};
  SamplerOptions sampled;
  sampled.temperature = 0.8f;
  sampled.seed = 5;
  constexpr int kTokens = 32;
  std::vector<std::vector<int32_t>> prompts, alone;
  for (size_t i = 0; i < texts.size(); ++i) {
    prompts.push_back((*tok)->Encode(texts[i]));
    GenerateOptions g;
    g.max_tokens = kTokens;
    if (i % 2 == 1) g.sampler = sampled;
    auto r = Generate(model, prompts.back(), g, nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
    alone.push_back(r->generated_ids);
  }
  size_t drafted = 0, accepted = 0, speculative_steps = 0, batched = 0;
  QueueOptions qo;
  qo.max_batch = 8;
  qo.prefix_cache_bytes = 64 << 20;
  qo.drafter = std::make_shared<NgramDrafter>();
  qo.draft_tokens = 3;
  qo.on_step = [&](const StepReport& r) {
    drafted += r.drafted;
    accepted += r.accepted;
    speculative_steps += r.drafted > 0 ? 1 : 0;
    batched += r.drafted > 0 && r.sequences > 1 ? 1 : 0;
  };
  {
    GenerationQueue queue(&model, qo);
    // Alone, one after the other: the first two repeat themselves.
    for (size_t i = 0; i < 2; ++i) {
      const Served s =
          Drain(Start(&queue, tok->get(), prompts[i],
                      i % 2 == 1 ? sampled : SamplerOptions(), kTokens));
      EXPECT_TRUE(s.status.ok()) << s.status;
      EXPECT_EQ(s.ids, alone[i]) << texts[i];
    }
    // The first again: it resumes from the state its speculative run kept.
    const Served again =
        Drain(Start(&queue, tok->get(), prompts[0], SamplerOptions(), kTokens));
    EXPECT_EQ(again.ids, alone[0]);
  }
  EXPECT_GT(speculative_steps, 0u);
  EXPECT_GT(accepted, 0u);
  EXPECT_LE(accepted, drafted);
  EXPECT_EQ(batched, 0u);  // one job at a time so far
  // Eight at once: guesses checked inside batched steps, the same tokens.
  GenerationQueue queue(&model, qo);
  // All eight queued at once (so they step together), then each drained on
  // a thread of its own.
  std::vector<absl::StatusOr<std::shared_ptr<Completion>>> started;
  for (size_t i = 0; i < texts.size(); ++i) {
    started.push_back(Start(&queue, tok->get(), prompts[i],
                            i % 2 == 1 ? sampled : SamplerOptions(), kTokens));
  }
  std::vector<Served> got(texts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < texts.size(); ++i) {
    clients.emplace_back([&, i] { got[i] = Drain(std::move(started[i])); });
  }
  for (std::thread& t : clients) t.join();
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_TRUE(got[i].status.ok()) << got[i].status;
    EXPECT_EQ(got[i].ids, alone[i]) << texts[i];
  }
  EXPECT_GT(batched, 0u);
}

}  // namespace
}  // namespace flotilla::coordinator::serve
