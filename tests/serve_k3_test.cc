// The HTTP API over the tiny Kimi K3, DeepSeek-V3 and Qwen3-MoE checkpoints
// (each ckpt_A, no tokenizer, so prompts are token ids). 16 clients stream
// greedy completions of 16 different prompts at once through continuous
// batching, with a prompt chunk small enough that prefill and decode share
// steps. Every stream's ids (read from its logprobs, "token_id:N") equal
// `Generate` on that prompt alone, and the queue really stepped several
// sequences together.
#include <httplib.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/engine.h"
#include "coordinator/generate.h"
#include "coordinator/serve/generation_queue.h"
#include "coordinator/serve/http_server.h"
#include "coordinator/serve/prefix_store.h"
#include "coordinator/serve/serve_test_fixture.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/testing/fixture.h"

namespace flotilla::coordinator::serve {
namespace {

// The token ids of a streamed completion with logprobs (SSE body), and
// whether it ended with [DONE].
std::vector<int32_t> StreamedIds(const std::string& body, bool* done,
                                 std::string* finish) {
  std::vector<int32_t> ids;
  for (const json& chunk : SseEvents(body, done)) {
    if (!chunk.is_object() || chunk["choices"].empty()) continue;
    const json& choice = chunk["choices"][0];
    if (!choice["finish_reason"].is_null()) *finish = choice["finish_reason"];
    if (!choice["logprobs"].is_object()) continue;
    for (const json& t : choice["logprobs"]["tokens"]) {
      ids.push_back(TokenIdOf(t));
    }
  }
  return ids;
}

class ServeByIdsTest : public ::testing::TestWithParam<const char*> {};

// The test data's checkpoint `name` (e.g. "k3/ckpt_A") in memory, 2 threads.
absl::StatusOr<std::unique_ptr<Engine>> OpenCheckpoint(const char* name) {
  EngineOptions eo;
  eo.model_dir = testutil::DataPath(name);
  eo.threads = 2;
  return OpenEngine(eo);
}

TEST_P(ServeByIdsTest, SixteenConcurrentStreamsByIdsEachAsGenerateAlone) {
  auto engine = OpenCheckpoint(GetParam());
  ASSERT_TRUE(engine.ok()) << engine.status();
  LanguageModel& model = *(*engine)->model;

  constexpr int kClients = 16, kTokens = 12;
  std::mt19937 rng(15);
  std::uniform_int_distribution<int32_t> token(0, model.vocab_size() - 1);
  std::uniform_int_distribution<int> length(2, 20);
  std::vector<std::vector<int32_t>> prompts(kClients);
  std::vector<std::vector<int32_t>> alone(kClients);
  for (int i = 0; i < kClients; ++i) {
    for (int n = length(rng); n > 0; --n) prompts[i].push_back(token(rng));
    GenerateOptions g;
    g.max_tokens = kTokens;
    auto r = Generate(model, prompts[i], g, nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
    alone[i] = r->generated_ids;
  }

  QueueOptions qo;
  qo.max_batch = 8;
  qo.prefill_chunk = 5;  // long prompts take several steps beside decodes
  GenerationQueue queue(&model, qo);
  ServeOptions so;
  so.port = 0;
  so.model_name = "ckpt_A";
  HttpServer server(&model, nullptr, &queue, so);
  ASSERT_TRUE(server.Start().ok());

  std::vector<std::vector<int32_t>> streamed(kClients);
  std::vector<std::string> finish(kClients);
  std::vector<int> done(kClients, 0);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", server.port());
      c.set_read_timeout(300, 0);
      const json body = {{"prompt", prompts[i]},
                         {"max_tokens", kTokens},
                         {"temperature", 0},
                         {"logprobs", 0},
                         {"stream", true}};
      auto r = c.Post("/v1/completions", body.dump(), "application/json");
      if (!r) {
        finish[i] = "no response: " + httplib::to_string(r.error());
        return;
      }
      if (r->status != 200) {
        finish[i] = "status " + std::to_string(r->status) + ": " + r->body;
        return;
      }
      bool d = false;
      streamed[i] = StreamedIds(r->body, &d, &finish[i]);
      done[i] = d;
    });
  }
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < kClients; ++i) {
    EXPECT_TRUE(done[i]) << "client " << i;
    EXPECT_EQ(streamed[i], alone[i]) << "client " << i;
    EXPECT_EQ(finish[i], "length") << "client " << i;
  }
  EXPECT_GT(queue.widest_step(), 1u);
  server.Stop();
}

// A server over `model` on a free port, with a prefix cache in memory
// and / or on disk, and greedy completions by ids through it.
class IdsServer {
 public:
  IdsServer(LanguageModel* model, uint64_t cache_bytes,
            std::shared_ptr<PrefixStore> store) {
    QueueOptions qo;
    qo.max_batch = 4;
    qo.prefill_chunk = 5;  // a prompt's end falls inside a chunk
    qo.prefix_cache_bytes = cache_bytes;
    qo.prefix_store = std::move(store);
    queue_ = std::make_unique<GenerationQueue>(model, qo);
    ServeOptions so;
    so.port = 0;
    so.model_name = "ckpt_A";
    server_ = std::make_unique<HttpServer>(model, nullptr, queue_.get(), so);
    EXPECT_TRUE(server_->Start().ok());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(300, 0);
  }
  ~IdsServer() { server_->Stop(); }

  // Six greedy ids after `prompt`; *cached: the prompt tokens the cache
  // served, from the usage.
  std::vector<int32_t> Complete(const std::vector<int32_t>& prompt,
                                size_t* cached) {
    const json body = {{"prompt", prompt},
                       {"max_tokens", 6},
                       {"temperature", 0},
                       {"logprobs", 0}};
    auto r = client_->Post("/v1/completions", body.dump(), "application/json");
    std::vector<int32_t> ids;
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no response");
    if (!r || r->status != 200) return ids;
    const json reply = json::parse(r->body);
    for (const json& t : reply["choices"][0]["logprobs"]["tokens"]) {
      ids.push_back(TokenIdOf(t));
    }
    *cached = reply["usage"]["prompt_tokens_details"]["cached_tokens"];
    return ids;
  }

 private:
  std::unique_ptr<GenerationQueue> queue_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

// A chat's next turn and a repeated request resume from the prefix cache in
// every family, in memory and from disk after a restart: a state that can
// be cut back (KV and latent caches) serves the longest shared beginning; a
// recurrent one (Kimi K3) was also kept one id short of its prompt's end.
// The replies are Generate's alone.
TEST_P(ServeByIdsTest, NextTurnsAndRepeatsResumeFromThePrefixCache) {
  auto engine = OpenCheckpoint(GetParam());
  ASSERT_TRUE(engine.ok()) << engine.status();
  LanguageModel& model = *(*engine)->model;
  const bool rewinds = model.StartSequence()->RewindsAnywhere();
  auto alone = [&](const std::vector<int32_t>& prompt) {
    GenerateOptions g;
    g.max_tokens = 6;
    auto r = Generate(model, prompt, g, nullptr);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->generated_ids : std::vector<int32_t>();
  };
  std::string dir = GetParam();
  std::replace(dir.begin(), dir.end(), '/', '_');
  dir = ::testing::TempDir() + "/next_turns_" + dir;
  std::filesystem::remove_all(dir);
  auto store = PrefixStore::Open(dir, "ckpt_A", 64 << 20);
  ASSERT_TRUE(store.ok()) << store.status();

  const std::vector<int32_t> first = {5, 17, 3, 44, 9, 21, 8, 30, 2, 11, 6, 13};
  // The next turn renders the reply otherwise (its first id differs), then
  // a new message: the shared beginning is the first prompt.
  std::vector<int32_t> second = first;
  size_t cached = 99;
  {
    IdsServer server(&model, 64 << 20, *std::move(store));
    const std::vector<int32_t> reply = server.Complete(first, &cached);
    EXPECT_EQ(reply, alone(first));
    EXPECT_EQ(cached, 0u);
    second.push_back(reply.empty() || reply[0] != 7 ? 7 : 8);
    for (int32_t id : {4, 19, 26, 1}) second.push_back(id);
    EXPECT_EQ(server.Complete(second, &cached), alone(second));
    EXPECT_EQ(cached, rewinds ? first.size() : first.size() - 1);
    // The same request again: all but the last id.
    EXPECT_EQ(server.Complete(second, &cached), alone(second));
    EXPECT_EQ(cached, second.size() - 1);
  }
  // A restart: nothing but the folder survives.
  store = PrefixStore::Open(dir, "ckpt_A", 64 << 20);
  ASSERT_TRUE(store.ok()) << store.status();
  IdsServer restarted(&model, 0, *std::move(store));
  EXPECT_EQ(restarted.Complete(second, &cached), alone(second));
  EXPECT_EQ(cached, second.size() - 1);
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, ServeByIdsTest,
                         ::testing::Values("k3/ckpt_A", "deepseek-v3/ckpt_A",
                                           "qwen3-moe/ckpt_A"));

}  // namespace
}  // namespace flotilla::coordinator::serve
