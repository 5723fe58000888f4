// `flotilla-coordinator serve`: the model opened once, the OpenAI-compatible
// HTTP API (coordinator/serve/http_server.h) until SIGINT or SIGTERM, which
// stop taking connections and let queued requests finish.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "coordinator/engine.h"
#include "coordinator/engine_metrics.h"
#include "coordinator/remote/remote_experts.h"
#include "coordinator/run_report.h"
#include "coordinator/serve/generation_defaults.h"
#include "coordinator/serve/grpc_generate.h"
#include "coordinator/serve/http_server.h"
#include "coordinator/serve/prefix_store.h"
#include "coordinator/serve/serve_metrics.h"
#include "coordinator/speculate.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server.h"
#include "shared/cli/flag_help.h"
#include "shared/io/memory_budget.h"
#include "shared/metrics/metrics_server.h"
#include "shared/model/checkpoint_fingerprint.h"
#include "shared/model/safetensors.h"
#include "shared/pack/pack_manifest.h"
#include "shared/tokenizer/tokenizer.h"
#include "shared/tokenizer/utf8.h"
#include "shared/transport/transport.h"

ABSL_FLAG(int32_t, worker_health_interval_ms, 1000,
          "with --workers: probe the expert workers this often while idle, "
          "so /readyz and the gRPC health service follow the fleet (0 = "
          "only as requests run)");
ABSL_FLAG(std::string, host, "127.0.0.1",
          "serve: address to listen on (127.0.0.1 = this machine only); "
          "generate: the address of --metrics-port");
ABSL_FLAG(int32_t, http_port, 8080, "serve: HTTP port (0 = any free port)");
ABSL_FLAG(int32_t, grpc_port, -1,
          "serve: also serve flotilla.v1.Generation over gRPC on this port "
          "(0 = any free port, -1 = off)");
ABSL_FLAG(std::string, api_key_file, "",
          "serve: file holding the API key clients must send as "
          "'Authorization: Bearer KEY' (empty: no key)");
ABSL_FLAG(int32_t, max_queue, 64, "serve: requests that may wait at most");
ABSL_FLAG(bool, strict_model_name, false,
          "serve: refuse (404) requests that name another model than "
          "--served-model-name; by default any name is answered by the model "
          "served (clients send their own default names)");
// generate's flags (main.cc), also read by serve.
ABSL_DECLARE_FLAG(std::string, speculate);
ABSL_DECLARE_FLAG(int32_t, draft_tokens);
ABSL_DECLARE_FLAG(std::string, draft_model);
ABSL_DECLARE_FLAG(bool, speculate_always);
ABSL_FLAG(int32_t, max_batch, 8,
          "serve: sequences stepped together in one forward pass at most");
ABSL_FLAG(int32_t, max_prompt_tokens, 0,
          "serve: longest prompt accepted; 0 = the context (--max-context) "
          "less one token for the reply");
ABSL_FLAG(std::string, prefix_cache, "64M",
          "serve: keep ended requests' sequence states up to this size, so a "
          "prompt that extends one (a chat's next turn) prefills only its new "
          "tokens; 0 = off");
ABSL_FLAG(std::string, prefix_cache_dir, "",
          "serve: also keep ended requests' sequence states in files in this "
          "folder, so a conversation's next turn prefills only its new "
          "tokens even after a restart (checked against the model's "
          "fingerprint and a checksum on load; empty = off)");
ABSL_FLAG(std::string, prefix_cache_disk, "8G",
          "serve: bytes --prefix-cache-dir may hold; least recently used "
          "states go first");
ABSL_FLAG(int32_t, max_completion_tokens, 4096,
          "serve: largest max_tokens a request may ask for");
ABSL_FLAG(int32_t, request_timeout_s, 600,
          "serve: a request still running after this many seconds ends with "
          "HTTP 504 / gRPC DEADLINE_EXCEEDED (0 = no limit)");
ABSL_FLAG(int32_t, drain_timeout_s, 60,
          "serve: on SIGTERM or SIGINT, wait this long for accepted requests "
          "to finish before closing");
ABSL_FLAG(int32_t, metrics_port, -1,
          "serve and generate: Prometheus metrics at "
          "http://HOST:PORT/metrics (0 = any free port, -1 = off)");
ABSL_FLAG(std::string, served_model_name, "",
          "serve: the model id /v1/models lists and requests name (default: "
          "the model folder's name)");
ABSL_FLAG(std::string, cors_origin, "",
          "serve: allow browser pages from this origin (\"*\": any) to call "
          "the API (CORS headers and OPTIONS preflights; empty: none)");
ABSL_FLAG(int32_t, max_connections, 512,
          "serve: open HTTP connections at most (each holds a thread); past "
          "it new ones are answered 503");
ABSL_FLAG(std::string, chat_template, "",
          "serve: the chat template: a Jinja file, or a built-in one (kimi, "
          "chatml, llama2, plain); default: the model's own "
          "(tokenizer_config.json's chat_template or chat_template.jinja), "
          "else its family's built-in one");
ABSL_FLAG(std::string, tool_call_parser, "",
          "serve: how the model writes tool calls: hermes "
          "(<tool_call>{...}</tool_call>), llama3_json ({\"name\": ..., "
          "\"parameters\": ...}) or none (default: recognised from the chat "
          "template)");

namespace flotilla::coordinator {
namespace {

volatile std::sig_atomic_t g_stop = 0;
// The first SIGINT/SIGTERM drains; a second one (an impatient Ctrl-C during
// the drain) exits at once, with 130 as a shell reports an interrupt.
void OnSignal(int) {
  if (g_stop) {
    static const char kMessage[] =
        "flotilla-coordinator: second signal: exiting without draining\n";
    (void)!::write(2, kMessage, sizeof(kMessage) - 1);
    ::_exit(130);
  }
  g_stop = 1;
}

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "flotilla-coordinator serve: %s\n", message.c_str());
  return code;
}

}  // namespace

int RunServe(const EngineOptions& eo) {
  serve::ServeOptions so;
  so.host = absl::GetFlag(FLAGS_host);
  so.port = absl::GetFlag(FLAGS_http_port);
  if (so.port < 0 || so.port > 65535)
    return Fail(2, "--http-port must be in 0..65535");
  const int max_queue = absl::GetFlag(FLAGS_max_queue);
  const int max_batch = absl::GetFlag(FLAGS_max_batch);
  if (max_batch < 1 || max_batch > 1024) {
    return Fail(2, "--max-batch must be in 1..1024");
  }
  so.limits.max_prompt_tokens = absl::GetFlag(FLAGS_max_prompt_tokens);
  so.limits.max_tokens = absl::GetFlag(FLAGS_max_completion_tokens);
  so.limits.max_context = eo.max_context;
  if (const int t = absl::GetFlag(FLAGS_request_timeout_s); t > 0) {
    so.limits.request_timeout = absl::Seconds(t);
  } else if (t < 0) {
    return Fail(2, "--request-timeout-s must be >= 0 (0 = no limit)");
  }
  if (max_queue < 1 || so.limits.max_prompt_tokens < 0 ||
      so.limits.max_tokens < 1) {
    return Fail(2,
                "--max-queue and --max-completion-tokens must be >= 1, "
                "--max-prompt-tokens >= 0 (0 = the context's)");
  }
  so.max_queue = static_cast<size_t>(max_queue);
  so.max_batch = static_cast<size_t>(max_batch);
  so.limits.default_max_tokens = std::min(256, so.limits.max_tokens);
  if (const std::string f = absl::GetFlag(FLAGS_api_key_file); !f.empty()) {
    std::ifstream in(f);
    if (!in) return Fail(2, absl::StrCat("--api-key-file: cannot read ", f));
    std::stringstream ss;
    ss << in.rdbuf();
    so.api_key = std::string(absl::StripAsciiWhitespace(ss.str()));
    if (so.api_key.empty())
      return Fail(2, absl::StrCat("--api-key-file: ", f, " is empty"));
  }
  std::optional<serve::ToolSyntax> tool_syntax;
  if (const std::string p = absl::GetFlag(FLAGS_tool_call_parser); !p.empty()) {
    auto parsed = serve::ParseToolSyntax(p);
    if (!parsed.ok()) {
      return Fail(
          2, absl::StrCat("--tool-call-parser: ", parsed.status().message()));
    }
    tool_syntax = *parsed;
  }
  std::string name = eo.model_dir;
  while (name.size() > 1 && name.back() == '/') name.pop_back();
  so.model_name = name.substr(name.find_last_of('/') + 1);
  if (std::string served = absl::GetFlag(FLAGS_served_model_name);
      !served.empty()) {
    // The id goes into every response and log line: printable text only.
    for (unsigned char ch : served) {
      if (ch < 0x20 || ch == 0x7f) {
        return Fail(2, absl::StrCat("--served-model-name: control character "
                                    "0x",
                                    absl::Hex(ch, absl::kZeroPad2),
                                    " (the id must be printable)"));
      }
    }
    if (served.size() > 256 || !tokenizer::IsValidUtf8(served)) {
      return Fail(2,
                  "--served-model-name: must be valid UTF-8 of at most "
                  "256 bytes");
    }
    so.model_name = std::move(served);
  }
  so.strict_model_name = absl::GetFlag(FLAGS_strict_model_name);
  so.cors_origin = absl::GetFlag(FLAGS_cors_origin);
  so.max_connections = absl::GetFlag(FLAGS_max_connections);
  if (so.max_connections < 1 || so.max_connections > 65536) {
    return Fail(2, "--max-connections must be in 1..65536");
  }

  // Checked whether or not --prefix-cache-dir is given: a bad value is a
  // mistake either way.
  auto disk_bytes = io::ParseByteSize(absl::GetFlag(FLAGS_prefix_cache_disk));
  if (!disk_bytes.ok()) {
    return Fail(2, absl::StrCat("--prefix-cache-disk: ",
                                disk_bytes.status().message()));
  }
  auto prefix_bytes = io::ParseByteSize(absl::GetFlag(FLAGS_prefix_cache));
  if (!prefix_bytes.ok()) {
    return Fail(
        2, absl::StrCat("--prefix-cache: ", prefix_bytes.status().message()));
  }
  const uint64_t prefix_cache = *prefix_bytes;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  if (auto t = tokenizer::Tokenizer::LoadDir(eo.model_dir); t.ok()) {
    tok = *std::move(t);
  } else if (!absl::IsNotFound(t.status())) {
    return Fail(1, t.status().ToString());
  }
  // Every sequence that may run at once, and the prefix cache, are charged
  // to the memory budget before the weights take the rest.
  EngineOptions with_state = eo;
  with_state.sequences = max_batch;
  with_state.prefix_cache_bytes = prefix_cache;
  with_state.worker_health_interval_ms =
      absl::GetFlag(FLAGS_worker_health_interval_ms);
  if (with_state.worker_health_interval_ms < 0) {
    return Fail(2, "--worker-health-interval-ms must be >= 0");
  }
  auto engine = OpenEngine(with_state);
  if (!engine.ok()) return Fail(1, engine.status().ToString());
  {
    // --chat-template, else the model's own template, else its family's.
    auto family_default = serve::ParseChatTemplate(
        (*engine)->config->family().default_chat_template);
    if (!family_default.ok())
      return Fail(1, family_default.status().ToString());
    auto format = serve::ChatFormat::Load(eo.model_dir, *family_default,
                                          absl::GetFlag(FLAGS_chat_template));
    if (!format.ok()) {
      if (!absl::GetFlag(FLAGS_chat_template).empty()) {
        return Fail(
            2, absl::StrCat("--chat-template: ", format.status().message()));
      }
      return Fail(
          1, absl::StrCat(format.status().message(),
                          " (--chat-template kimi|chatml|llama2|plain or a "
                          "Jinja file serves it with another template)"));
    }
    if (tool_syntax.has_value()) format->set_tool_syntax(*tool_syntax);
    so.chat_format =
        std::make_shared<const serve::ChatFormat>(*std::move(format));
  }
  // The budget as charged: the states of --max-batch sequences and the
  // prefix cache included.
  if ((*engine)->accountant != nullptr) {
    std::printf("flotilla-coordinator: memory budget\n%s",
                (*engine)->accountant->Report().c_str());
  }
  // The context each sequence's state was charged for: the model's own
  // (capped by the budget) when --max-context is not given; a given one
  // past the model's positions is refused.
  so.limits.max_context = (*engine)->max_context;
  {
    auto defaults = serve::LoadGenerationDefaults(eo.model_dir);
    if (!defaults.ok()) return Fail(1, defaults.status().ToString());
    so.limits.default_sampler = defaults->sampler;
    std::printf("flotilla-coordinator: sampling a request leaves out: %s\n",
                defaults->description.c_str());
  }
  if (const int trained = (*engine)->model->max_positions();
      trained > 0 && so.limits.max_context > trained) {
    if (eo.max_context > 0) {
      return Fail(2, absl::StrCat("--max-context ", so.limits.max_context,
                                  " is past the model's ", trained,
                                  " positions (max_position_embeddings)"));
    }
    so.limits.max_context = trained;
  }
  if (so.limits.max_prompt_tokens == 0) {
    so.limits.max_prompt_tokens = std::max(1, so.limits.max_context - 1);
    so.limits.prompt_limit_flag = "--max-context";
  } else if (so.limits.max_prompt_tokens >= so.limits.max_context) {
    return Fail(
        2, absl::StrCat("--max-prompt-tokens ", so.limits.max_prompt_tokens,
                        " leaves no room for a reply in the context "
                        "of ",
                        so.limits.max_context, " (--max-context)"));
  }
  std::printf("flotilla-coordinator: context %d tokens: %s; prompts up to %d\n",
              so.limits.max_context, (*engine)->max_context_reason.c_str(),
              so.limits.max_prompt_tokens);
  serve::QueueOptions qo;
  qo.max_queue = so.max_queue;
  qo.max_batch = static_cast<size_t>(max_batch);
  qo.prefix_cache_bytes = prefix_cache;
  qo.prefill_chunk = static_cast<size_t>(eo.prefill_chunk);
  if (!absl::GetFlag(FLAGS_draft_model).empty()) {
    // One draft state per job would need its own budget; refused, not
    // ignored.
    return Fail(2,
                "serve: --draft-model is for generate; serve speculates with "
                "--speculate ngram");
  }
  if (const std::string name = absl::GetFlag(FLAGS_speculate); !name.empty()) {
    if (name != "ngram") {
      return Fail(2, absl::StrCat("serve --speculate: '", name,
                                  "' (serve takes ngram)"));
    }
    auto drafter = MakeDrafter(name, !absl::GetFlag(FLAGS_speculate_always));
    if (!drafter.ok()) return Fail(2, std::string(drafter.status().message()));
    qo.drafter = std::move(*drafter);
    qo.draft_tokens = absl::GetFlag(FLAGS_draft_tokens);
    if (qo.draft_tokens < 1 || qo.draft_tokens > 64) {
      return Fail(2, "--draft-tokens must be in 1..64");
    }
  }
  if (const std::string dir = absl::GetFlag(FLAGS_prefix_cache_dir);
      !dir.empty()) {
    const absl::StatusOr<uint64_t>& disk = disk_bytes;
    // States are only valid for this checkpoint, family and build.
    absl::StatusOr<std::string> checkpoint =
        !(*engine)->pack_dir.empty() ? [&]() -> absl::StatusOr<std::string> {
      auto m = pack::LoadPackManifest((*engine)->pack_dir);
      if (!m.ok()) return m.status();
      return m->source_fingerprint;
    }()
        : [&]() -> absl::StatusOr<std::string> {
            auto source = model::SafetensorsCheckpoint::OpenDir(eo.model_dir);
            if (!source.ok()) return source.status();
            return model::FingerprintCheckpoint(eo.model_dir, **source);
          }();
    if (!checkpoint.ok()) {
      return Fail(1,
                  absl::StrCat("--prefix-cache-dir: the model's fingerprint: ",
                               checkpoint.status().message()));
    }
    auto store = serve::PrefixStore::Open(
        dir,
        absl::StrCat(*checkpoint, "/", (*engine)->family, "/",
                     flotilla::cli::Version()),
        *disk);
    if (!store.ok()) return Fail(2, store.status().ToString());
    std::printf(
        "flotilla-coordinator: prefix cache in %s: %zu states, %.1f MB\n",
        dir.c_str(), (*store)->files(), (*store)->bytes() / 1e6);
    qo.prefix_store = *std::move(store);
  }
  // Prometheus metrics at /metrics on --metrics-port.
  auto registry = std::make_shared<prometheus::Registry>();
  metrics::AddBuildInfo(*registry, "coordinator");
  serve::ServeMetrics serve_metrics(*registry);
  EngineMetrics engine_metrics(*registry);
  std::unique_ptr<metrics::MetricsServer> metrics_server;
  if (const int port = absl::GetFlag(FLAGS_metrics_port); port >= 0) {
    if (port > 65535) return Fail(2, "--metrics-port must be in -1..65535");
    engine_metrics.Memory(**engine);
    engine_metrics.Baseline(SnapshotCounters(**engine));
    so.metrics = &serve_metrics;
    const Engine* engine_ptr = engine->get();
    // On the queue's thread, which owns the model: the engine's counters
    // are read there, after each step.
    qo.on_step = [&serve_metrics, &engine_metrics,
                  engine_ptr](const serve::StepReport& r) {
      serve_metrics.Step(r.sequences, r.tokens, r.waiting, r.running);
      if (r.prefix_hits > 0) {
        serve_metrics.PrefixHit(r.reused_tokens);
      }
      if (r.drafted > 0) serve_metrics.Speculated(r.drafted, r.accepted);
      engine_metrics.Step(SnapshotCounters(*engine_ptr), r.prompt_tokens,
                          r.tokens, r.seconds);
    };
    qo.on_idle = [&serve_metrics](size_t waiting) {
      serve_metrics.Idle(waiting);
    };
    auto started = metrics::MetricsServer::Start(so.host, port, registry);
    if (!started.ok()) return Fail(1, started.status().ToString());
    metrics_server = *std::move(started);
    std::printf("flotilla-coordinator: metrics on http://%s:%d/metrics\n",
                so.host.c_str(), metrics_server->port());
  }
  serve::GenerationQueue queue((*engine)->model.get(), qo);
  // Expert workers: /readyz turns 503 while some expert has no live worker.
  if (const auto* remote =
          dynamic_cast<const RemoteExperts*>((*engine)->model->experts())) {
    so.missing_experts = [remote] { return remote->MissingExperts(); };
  }
  serve::HttpServer server((*engine)->model.get(), tok.get(), &queue, so);
  if (absl::Status s = server.Start(); !s.ok()) return Fail(1, s.ToString());
  serve::GenerationService generation((*engine)->model.get(), tok.get(), &queue,
                                      so.limits, so.metrics);
  std::unique_ptr<grpc::Server> grpc_server;
  if (const int grpc_port = absl::GetFlag(FLAGS_grpc_port); grpc_port >= 0) {
    transport::ServerOptions go;
    go.host = so.host;
    go.port = grpc_port;
    go.services = {&generation};
    int bound = 0;
    auto started = transport::StartServer(go, &bound);
    if (!started.ok()) return Fail(1, started.status().ToString());
    grpc_server = *std::move(started);
    std::printf("flotilla-coordinator: gRPC flotilla.v1.Generation on %s\n",
                transport::HostPort(so.host, bound).c_str());
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::printf(
      "flotilla-coordinator: serving %s (%s chat template, %s tool calls) "
      "on http://%s:%d\n",
      so.model_name.c_str(), so.chat_format->description().c_str(),
      serve::ToolSyntaxName(so.chat_format->tool_syntax()), so.host.c_str(),
      server.port());
  std::fflush(stdout);
  // The gRPC health service says NOT_SERVING while some expert has no live
  // worker, as /readyz does (checked a few times a second).
  grpc::HealthCheckServiceInterface* health =
      grpc_server != nullptr ? grpc_server->GetHealthCheckService() : nullptr;
  while (!g_stop) {
    if (health != nullptr && so.missing_experts) {
      health->SetServingStatus(so.missing_experts().empty());
    }
    absl::SleepFor(absl::Milliseconds(250));
  }
  if (health != nullptr) health->Shutdown();
  // Graceful drain: refuse new requests, let the accepted ones finish
  // (up to --drain-timeout-s), then close.
  const absl::Duration drain =
      absl::Seconds(absl::GetFlag(FLAGS_drain_timeout_s));
  std::printf("flotilla-coordinator: draining (up to %s)\n",
              absl::FormatDuration(drain).c_str());
  std::fflush(stdout);
  const absl::Time deadline = absl::Now() + drain;
  // gRPC refuses new calls and waits for open ones beside the HTTP drain.
  std::thread grpc_drain([&] {
    if (grpc_server != nullptr) {
      grpc_server->Shutdown(absl::ToChronoTime(deadline));
    }
  });
  const bool drained = server.Drain(drain);
  grpc_drain.join();
  queue.Shutdown();
  server.Stop();
  std::printf("flotilla-coordinator: stopped%s\n",
              drained ? "" : " (the drain timed out; open requests were cut)");
  return 0;
}

}  // namespace flotilla::coordinator
