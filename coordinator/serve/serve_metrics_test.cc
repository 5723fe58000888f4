// The serving metrics as Prometheus would scrape them, after real requests
// through the HTTP server on the stories model with its experts streamed
// from disk: request and token counts, time to first token, and the bytes
// read, which must equal the engine's own counters (what --stats reports).
#include "coordinator/serve/serve_metrics.h"

#include <httplib.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "coordinator/engine.h"
#include "coordinator/engine_metrics.h"
#include "coordinator/run_report.h"
#include "coordinator/serve/generation_queue.h"
#include "coordinator/serve/http_server.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/metrics/metrics_server.h"
#include "shared/testing/fixture.h"
#include "shared/tokenizer/tokenizer.h"

namespace flotilla::coordinator::serve {
namespace {

using metrics::SampleValue;

// The stories model behind an HttpServer with metrics wired as serve wires
// them (the engine's baseline, a report per step and when the batch
// empties). `mem` "" = no budget: every expert resident.
struct MeteredServer {
  explicit MeteredServer(const std::string& mem,
                         absl::Duration timeout = absl::InfiniteDuration()) {
    EngineOptions eo;
    eo.model_dir = testutil::ModelPath("stories260k-moe");
    if (!mem.empty()) eo.mem = mem;
    eo.max_context = 128;
    eo.sequences = 2;
    auto opened = OpenEngine(eo);
    auto tok = tokenizer::Tokenizer::LoadDir(eo.model_dir);
    if (!opened.ok() || !tok.ok()) return;
    engine = *std::move(opened);
    tokenizer = *std::move(tok);
    const Engine* e = engine.get();
    engine_metrics.Baseline(SnapshotCounters(*e));
    QueueOptions qo;
    qo.max_batch = 2;
    qo.prefill_chunk = 0;  // the whole prompt in the first step
    qo.on_step = [this, e](const StepReport& r) {
      metrics.Step(r.sequences, r.tokens, r.waiting, r.running);
      engine_metrics.Step(SnapshotCounters(*e), r.prompt_tokens, r.tokens,
                          r.seconds);
    };
    qo.on_idle = [this](size_t waiting) { metrics.Idle(waiting); };
    queue = std::make_unique<GenerationQueue>(engine->model.get(), qo);
    ServeOptions so;
    so.port = 0;
    so.model_name = "stories260k-moe";
    so.limits.max_context = 128;
    so.limits.request_timeout = timeout;
    so.limits.timeout_ends_as_length = false;  // a timeout is a failure here
    so.metrics = &metrics;
    so.access_log = false;
    server = std::make_unique<HttpServer>(engine->model.get(), tokenizer.get(),
                                          queue.get(), so);
    if (!server->Start().ok()) server.reset();
  }
  ~MeteredServer() {
    if (server != nullptr) server->Stop();
  }

  prometheus::Registry registry;
  ServeMetrics metrics{registry};
  EngineMetrics engine_metrics{registry};
  std::unique_ptr<Engine> engine;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  std::unique_ptr<GenerationQueue> queue;
  std::unique_ptr<HttpServer> server;
};

TEST(ServeMetricsTest, CountsRequestsTokensAndTheEnginesReads) {
  MeteredServer m("4M");  // the experts (5.3 MB) are streamed from disk
  ASSERT_NE(m.server, nullptr);
  prometheus::Registry& registry = m.registry;
  const std::unique_ptr<Engine>& engine = m.engine;
  httplib::Client client("127.0.0.1", m.server->port());
  auto ok = client.Post("/v1/completions",
                        R"({"prompt": "Once upon a time", "max_tokens": 20})",
                        "application/json");
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, 200) << ok->body;
  EXPECT_FALSE(ok->get_header_value("X-Request-Id").empty());
  const auto body = nlohmann::json::parse(ok->body);
  EXPECT_EQ(ok->get_header_value("X-Request-Id"), body["id"]);
  auto bad =
      client.Post("/v1/completions", R"({"prompt": 5})", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  m.server->Stop();

  const std::string scrape = metrics::Scrape(registry);
  EXPECT_EQ(
      SampleValue(
          scrape,
          R"(flotilla_serve_requests_total{api="completions",status="200"})"),
      1);
  EXPECT_EQ(
      SampleValue(
          scrape,
          R"(flotilla_serve_requests_total{api="completions",status="400"})"),
      1);
  EXPECT_EQ(SampleValue(scrape, "flotilla_serve_generated_tokens_total"),
            body["usage"]["completion_tokens"].get<double>());
  EXPECT_EQ(
      SampleValue(scrape, "flotilla_serve_time_to_first_token_seconds_count"),
      1);
  // The bytes Prometheus sees are the engine's own counters.
  const RunCounters now = SnapshotCounters(*engine);
  ASSERT_GT(now.experts.bytes_read, 0u);
  const double prefill = SampleValue(
      scrape,
      R"(flotilla_coordinator_read_bytes_total{phase="prefill",source="experts"})");
  const double decode = SampleValue(
      scrape,
      R"(flotilla_coordinator_read_bytes_total{phase="decode",source="experts"})");
  EXPECT_GT(prefill, 0);
  EXPECT_GT(decode, 0);
  EXPECT_EQ(prefill + decode, static_cast<double>(now.experts.bytes_read));
  // One prefill step (the whole prompt, the first token), then one decode
  // step per further token.
  const double tokens = body["usage"]["completion_tokens"].get<double>();
  EXPECT_EQ(SampleValue(scrape,
                        R"(flotilla_coordinator_steps_total{phase="prefill"})"),
            1);
  EXPECT_EQ(SampleValue(scrape,
                        R"(flotilla_coordinator_tokens_total{phase="decode"})"),
            tokens - 1);
  // Issue 44 item 12: the prefill counts the prompt's tokens, as
  // flotilla_serve_prompt_tokens_total does (no prefix cache here).
  EXPECT_EQ(
      SampleValue(scrape,
                  R"(flotilla_coordinator_tokens_total{phase="prefill"})"),
      body["usage"]["prompt_tokens"].get<double>());
  EXPECT_EQ(SampleValue(scrape, "flotilla_serve_prompt_tokens_total"),
            body["usage"]["prompt_tokens"].get<double>());
  EXPECT_EQ(
      SampleValue(
          scrape,
          R"(flotilla_coordinator_read_bytes_per_token_count{source="experts"})"),
      SampleValue(scrape, "flotilla_serve_steps_total"));
  // Stories routes 2 of 8 experts per token in each of its 5 layers.
  const auto prompt_tokens = body["usage"]["prompt_tokens"].get<double>();
  for (int layer = 0; layer < 5; ++layer) {
    EXPECT_EQ(SampleValue(scrape,
                          "flotilla_coordinator_expert_routed_total{layer=\"" +
                              std::to_string(layer) + "\"}"),
              2 * (prompt_tokens + tokens - 1))
        << layer;
  }
}

// In memory (the budget holds every expert): the experts are read once at
// open and none per token, so Prometheus reports no expert reads; a client
// that leaves mid-stream is counted as 499, not 200, and leaves the running
// gauge at 0.
TEST(ServeMetricsTest, ResidentExpertsReadNothingAndAHangUpIs499) {
  MeteredServer m("");
  ASSERT_NE(m.server, nullptr);
  prometheus::Registry& registry = m.registry;
  HttpServer& server = *m.server;
  httplib::Client client("127.0.0.1", server.port());
  auto ok = client.Post("/v1/completions",
                        R"({"prompt": "Once upon a time", "max_tokens": 20})",
                        "application/json");
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, 200) << ok->body;
  std::string scrape = metrics::Scrape(registry);
  // Issue 44 item 12: resident experts are still computed, and counted.
  EXPECT_GT(
      SampleValue(scrape, "flotilla_coordinator_expert_activations_total"), 0);
  EXPECT_GT(
      SampleValue(scrape, "flotilla_coordinator_expert_compute_seconds_total"),
      0);
  for (const char* phase : {"prefill", "decode"}) {
    EXPECT_EQ(SampleValue(scrape, absl::StrCat(
                                      R"(flotilla_coordinator_read_bytes_total)"
                                      R"({phase=")",
                                      phase, R"(",source="experts"})")),
              0)
        << phase;
  }
  // A stream the client leaves after its first bytes.
  {
    httplib::Client leaver("127.0.0.1", server.port());
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.set_header("Content-Type", "application/json");
    req.body = R"({"prompt": "Once", "max_tokens": 120, "stream": true})";
    size_t got = 0;
    req.content_receiver = [&](const char*, size_t n, uint64_t, uint64_t) {
      got += n;
      return false;  // hang up
    };
    (void)leaver.send(req);
    EXPECT_GT(got, 0u);
  }
  const std::string hung_up =
      R"(flotilla_serve_requests_total{api="completions",status="499"})";
  // Bounded waits: the answer is asserted below, whatever the time taken.
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (SampleValue(metrics::Scrape(registry), hung_up) < 1 &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // The cancelled sequence leaves the batch at the next step; the gauge
  // follows even though no other request comes.
  while (SampleValue(metrics::Scrape(registry),
                     "flotilla_serve_running_sequences") != 0 &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(SampleValue(metrics::Scrape(registry),
                        "flotilla_serve_running_sequences"),
            0);
  scrape = metrics::Scrape(registry);
  EXPECT_EQ(SampleValue(scrape, hung_up), 1);
  EXPECT_EQ(
      SampleValue(
          scrape,
          R"(flotilla_serve_requests_total{api="completions",status="200"})"),
      1);
  server.Stop();
}

// Issue 44 item 12: a stream that sent its 200 and then failed (here its
// time ran out) is counted under the failure's status, not 200.
TEST(ServeMetricsTest, AStreamThatFailsAfterItsHeadersCountsAsTheFailure) {
  MeteredServer m("", absl::Milliseconds(5));
  ASSERT_NE(m.server, nullptr);
  httplib::Client client("127.0.0.1", m.server->port());
  auto r =
      client.Post("/v1/completions",
                  R"({"prompt": "Once", "max_tokens": 120, "ignore_eos": true,
                           "stream": true})",
                  "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("timeout_error"), std::string::npos) << r->body;
  const std::string timed_out =
      R"(flotilla_serve_requests_total{api="completions",status="504"})";
  // The count is made once the response is written: a bounded wait.
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (SampleValue(metrics::Scrape(m.registry), timed_out) < 1 &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::string scrape = metrics::Scrape(m.registry);
  EXPECT_EQ(SampleValue(scrape, timed_out), 1);
  EXPECT_EQ(
      SampleValue(
          scrape,
          R"(flotilla_serve_requests_total{api="completions",status="200"})"),
      -1);
  m.server->Stop();
}

}  // namespace
}  // namespace flotilla::coordinator::serve
