// Completions consumed from many threads at once, as the HTTP and gRPC
// front ends consume them, but without either library: every frame here is
// Flotilla's, so a ThreadSanitizer build checks the hand-off between the
// queue's thread and the consumers (Completion's lock and condition,
// Cancel, the metrics) that tests/tsan.supp leaves unchecked under
// cpp-httplib's and gRPC's uninstrumented frames.
#include "coordinator/serve/completion_job.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/engine.h"
#include "coordinator/generate.h"
#include "coordinator/serve/generation_queue.h"
#include "coordinator/serve/serve_metrics.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "shared/testing/fixture.h"
#include "shared/tokenizer/tokenizer.h"

namespace flotilla::coordinator::serve {
namespace {

TEST(CompletionThreadsTest, ConsumersOnTheirOwnThreadsGetWhatGenerateGives) {
  const std::string dir = testutil::ModelPath("stories260k-moe");
  EngineOptions eo;
  eo.model_dir = dir;
  eo.mem = "1G";
  auto engine = OpenEngine(eo);
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto tok = tokenizer::Tokenizer::LoadDir(dir);
  ASSERT_TRUE(tok.ok()) << tok.status();
  LanguageModel& model = *(*engine)->model;

  const std::vector<std::string> texts = {
      "Once upon a time",  "The little dog",
      "One day",           "Tom had a red ball",
      "The sun was hot",   "A big cat",
      "Sue liked to sing", "Lily"};
  constexpr int kTokens = 16;
  std::vector<std::vector<int32_t>> prompts, alone;
  for (const std::string& t : texts) {
    prompts.push_back((*tok)->Encode(t));
    GenerateOptions g;
    g.max_tokens = kTokens;
    g.stop_ids = (*tok)->StopIds();
    auto r = Generate(model, prompts.back(), g, nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
    alone.push_back(r->generated_ids);
  }

  prometheus::Registry registry;
  ServeMetrics metrics(registry);
  QueueOptions qo;
  qo.max_batch = 4;  // more consumers than the batch: some wait their turn
  qo.prefill_chunk = 2;
  GenerationQueue queue(&model, qo);
  const size_t n = prompts.size();
  std::vector<std::vector<int32_t>> got(n);
  std::vector<absl::Status> status(n);
  std::vector<std::thread> consumers;
  for (size_t i = 0; i < n; ++i) {
    consumers.emplace_back([&, i] {
      CompletionSpec spec;
      spec.prompt = prompts[i];
      spec.max_tokens = kTokens;
      spec.top_logprobs = 2;
      auto c = Completion::Start(&queue, tok->get(), spec, &metrics);
      if (!c.ok()) {
        status[i] = c.status();
        return;
      }
      CompletionPiece piece;
      bool done = false;
      while (!done) {
        done = (*c)->Take(&piece);
        got[i].insert(got[i].end(), piece.ids.begin(), piece.ids.end());
      }
      status[i] = (*c)->status();
    });
  }
  // One more consumer that goes away after its first piece.
  absl::Status cancelled_status;
  consumers.emplace_back([&] {
    CompletionSpec spec;
    spec.prompt = prompts[0];
    spec.max_tokens = 400;
    auto c = Completion::Start(&queue, tok->get(), spec, &metrics);
    if (!c.ok()) {
      cancelled_status = c.status();
      return;
    }
    CompletionPiece piece;
    bool done = (*c)->Take(&piece);
    (*c)->Cancel();
    while (!done) done = (*c)->Take(&piece);
    cancelled_status = (*c)->status();
  });
  for (std::thread& t : consumers) t.join();
  for (size_t i = 0; i < n; ++i) {
    EXPECT_TRUE(status[i].ok()) << texts[i] << ": " << status[i];
    EXPECT_EQ(got[i], alone[i]) << texts[i];
  }
  EXPECT_TRUE(absl::IsCancelled(cancelled_status)) << cancelled_status;
  EXPECT_GT(queue.widest_step(), 1u);
}

}  // namespace
}  // namespace flotilla::coordinator::serve
