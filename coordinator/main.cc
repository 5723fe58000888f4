// flotilla-coordinator: runs Kimi K3 and Mixtral-family models. Subcommands:
//   generate  prefill a prompt and decode new tokens (greedy or sampled).
//   serve     the OpenAI-compatible HTTP API over the model opened once
//             (serve_main.cc).
//
// Exit codes: 0 success (and --help), 1 runtime failure (bad model files, a
// failed forward pass), 2 bad command line.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "coordinator/draft_model.h"
#include "coordinator/engine.h"
#include "coordinator/engine_metrics.h"
#include "coordinator/families/kimi_k3/model.h"
#include "coordinator/generate.h"
#include "coordinator/plan_report.h"
#include "coordinator/run_report.h"
#include "coordinator/speculate.h"
#include "nlohmann/json.hpp"
#include "shared/base/elapsed.h"
#include "shared/base/read_file.h"
#include "shared/cli/flag_help.h"
#include "shared/io/memory_budget.h"
#include "shared/kernels/kernels.h"
#include "shared/metrics/metrics_server.h"
#include "shared/tokenizer/stream_decoder.h"
#include "shared/tokenizer/tokenizer.h"

ABSL_FLAG(std::string, model, "", "model folder (config.json, *.safetensors)");
ABSL_FLAG(std::string, config, "",
          "config file to use instead of <model>/config.json");
ABSL_FLAG(std::string, prompt, "", "prompt text (needs a tokenizer)");
ABSL_FLAG(std::string, prompt_file, "", "file holding the prompt text");
ABSL_FLAG(std::string, ids, "", "prompt as token ids, e.g. 3,7,11");
ABSL_FLAG(int32_t, max_tokens, 16, "new tokens to generate at most");
ABSL_FLAG(std::string, speculate, "",
          "speculative decoding: ngram (guesses from the text so far, checked "
          "in one forward pass; the output is unchanged); empty = off");
ABSL_FLAG(bool, speculate_always, false,
          "with --speculate or --draft-model: guess on every pass, even while "
          "guessing is measured to cost more than plain passes (benchmarks)");
ABSL_FLAG(int32_t, draft_tokens, 4,
          "with --speculate: guesses checked per forward pass, 1..64");
ABSL_FLAG(std::string, draft_model, "",
          "speculative decoding with this smaller model's greedy guesses (same "
          "tokenizer); the output is unchanged");
ABSL_FLAG(std::string, draft_mem, "1G",
          "memory budget of --draft-model, taken out of --mem");
ABSL_FLAG(double, plan_tokens_per_pass, 0,
          "with --plan: also predict speculative decoding with --draft-tokens "
          "guesses per pass yielding this many tokens (1 .. draft-tokens + 1); "
          "0 = no");
ABSL_FLAG(double, temperature, 0.0, "0 = greedy; > 0 samples");
ABSL_FLAG(int32_t, top_k, 0, "sample among the k most likely (0 = all)");
ABSL_FLAG(double, top_p, 1.0, "nucleus sampling mass in (0, 1]");
ABSL_FLAG(uint64_t, seed, 0, "random seed for sampling");
ABSL_FLAG(int32_t, threads, 0, "compute threads (0 = all hardware threads)");
ABSL_FLAG(std::string, simd, "auto",
          "kernel SIMD path: auto (the fastest), scalar, avx2, avx512 or "
          "highway; all give the same bits");
ABSL_FLAG(std::string, stop_ids, "",
          "extra stop token ids, comma separated (the tokenizer's end of "
          "text, e.g. </s> or <|end_of_msg|>, stops unless --ignore-eos)");
ABSL_FLAG(bool, ignore_eos, false,
          "keep generating past the tokenizer's end-of-text token");
ABSL_FLAG(std::string, dump_logits, "",
          "write little-endian float32 [steps][vocab]; row s holds the "
          "logits that chose generated token s");
ABSL_FLAG(bool, json, false, "print one JSON object instead of text");
ABSL_FLAG(std::string, mem, "auto",
          "memory budget: a size (8G, 512M) or a preset: laptop (8G), "
          "desktop (32G), workstation (96G), server (128G), max, auto "
          "(MemAvailable)");
ABSL_FLAG(bool, plan, false,
          "print the memory plan (and predicted s/token) and exit; needs "
          "only config.json");
ABSL_FLAG(bool, stats, false,
          "print per-token I/O and timing statistics (always in --json)");
ABSL_FLAG(std::string, pack, "",
          "packed trunk folder (default <model>/flotilla-pack when present)");
ABSL_FLAG(std::string, expert_cache, "0",
          "resident expert cache size (e.g. 2G); 0 = none");
ABSL_FLAG(bool, expert_prefetch, true,
          "before each MoE layer's attention, start reading the experts it "
          "will probably route to (its router on the layer input so far); "
          "on by default, --expert-prefetch=false turns it off");
ABSL_FLAG(int, expert_prefetch_extra, 0,
          "with --expert-prefetch: also read each token's next N experts by "
          "router score (more hits, more bytes)");
ABSL_FLAG(std::string, reader, "auto", "I/O engine: auto, uring or pread");
ABSL_FLAG(int32_t, queue_depth, 32, "expert reads in flight at most");
ABSL_FLAG(int32_t, max_context, 0,
          "positions each sequence's state (KV / MLA cache) is reserved for: "
          "the longest prompt plus reply; 0 = the model's "
          "max_position_embeddings, capped so the states of every sequence "
          "at once take at most a quarter of --mem (the startup line says "
          "which)");
ABSL_FLAG(int32_t, prefill_chunk, 256,
          "prompt tokens per forward pass (0 = whole prompt)");
ABSL_FLAG(double, disk_gbps, 3.0,
          "disk read bandwidth (GB/s) for trunk reads in --plan predictions "
          "(flotilla-tool doctor measures it)");
ABSL_FLAG(double, expert_disk_gbps, 0,
          "disk bandwidth (GB/s) of expert-sized reads for --plan "
          "predictions (0 = --disk-gbps)");
ABSL_FLAG(double, single_read_gbps, 0,
          "disk bandwidth (GB/s) of one expert read alone (QD1, after a "
          "wrong prefetch guess) for --plan predictions (0 = "
          "--expert-disk-gbps)");
ABSL_FLAG(int32_t, max_pinned_layers, -1,
          "pin at most this many trunk layers (-1 = as many as the budget "
          "allows)");
ABSL_FLAG(bool, stream_vocab, false,
          "never pin the embedding and lm_head (read rows/chunks on demand)");
ABSL_FLAG(bool, verify_checksums, true,
          "verify every streamed region and expert against its checksum");
ABSL_FLAG(std::string, workers, "",
          "expert workers host:port,host:port,...: routed experts run there "
          "(this machine needs only the trunk); empty = in this process");
ABSL_FLAG(int32_t, rpc_deadline_ms, 10000,
          "deadline of every expert-worker call; a call past it is retried "
          "on a replica");
ABSL_FLAG(int32_t, connect_timeout_ms, 0,
          "at start, wait up to this long for expert workers that do not "
          "answer yet (still starting); 0 = a worker that refuses or is "
          "unknown is down at once (started without if the others hold "
          "its experts, else an error within a second)");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA that signed the workers' certificates: talk TLS to them");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM client certificate for mutual TLS (with --tls-key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for --tls-cert");
ABSL_FLAG(double, metrics_linger_s, 0,
          "generate: keep /metrics (--metrics-port) up this long after the "
          "run, so that a last scrape sees its final counts");
ABSL_DECLARE_FLAG(int32_t, metrics_port);
ABSL_DECLARE_FLAG(std::string, host);

namespace flotilla::coordinator {
int RunServe(const EngineOptions& eo);
int RunHealth();  // health_main.cc
}  // namespace flotilla::coordinator

namespace {

using flotilla::coordinator::GenerateOptions;
using flotilla::coordinator::GenerateResult;
using flotilla::coordinator::K3Model;

// Whether --prompt appeared at all (an empty prompt is still a prompt);
// set by main() while it rewrites the flags.
bool g_prompt_given = false;

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

constexpr char kUsage[] =
    "usage: flotilla-coordinator generate --model DIR\n"
    "           (--prompt TEXT | --prompt-file F | --ids 1,2,3)\n"
    "           [--max-tokens N] [--temperature T] [--top-k K] [--top-p P]\n"
    "           [--seed S] [--threads N] [--stop-ids IDS] [--config FILE]\n"
    "           [--dump-logits FILE] [--json] [--mem SIZE|PRESET] [--plan]\n"
    "           [--stats] [--pack DIR] [--expert-cache SIZE] [--ignore-eos]\n"
    "           [--expert-prefetch=true|false] [--expert-prefetch-extra N]\n"
    "           [--reader auto|uring|pread]\n"
    "           [--metrics-port P [--host ADDR] [--metrics-linger-s S]]\n"
    "           [--workers H:P,...] [--rpc-deadline-ms MS]\n"
    "           [--connect-timeout-ms MS]\n"
    "           [--tls-ca F [--tls-cert F --tls-key F]]\n\n"
    "       flotilla-coordinator serve --model DIR [--host ADDR] [--http-port "
    "P]\n"
    "           [--grpc-port P] [--api-key-file F] [--max-batch N]\n"
    "           [--max-queue N] [--max-prompt-tokens N] [--prefix-cache SIZE]\n"
    "           [--max-completion-tokens N] [--chat-template NAME]\n"
    "           [--served-model-name NAME] [--cors-origin ORIGIN]\n"
    "           [--max-connections N] [--max-context N]\n"
    "           [engine flags: --mem, --pack, --workers, --threads, ...]\n\n"
    "       flotilla-coordinator health --address HOST:PORT\n"
    "           [--health-timeout-ms MS] [--tls-ca F ...]\n"
    "           (a worker's or serve's gRPC health: SERVING exits 0)\n\n"
    "Runs a Kimi K3 or Mixtral checkpoint (Hugging Face layout; the family\n"
    "comes from config.json's model_type) on this machine.\n"
    "--json prints {prompt_ids, generated_ids, text (with a tokenizer),\n"
    "finish_reason, timings, memory}.\n";

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "flotilla-coordinator: %s\n", message.c_str());
  return code;
}

bool FileExists(const std::string& path) {
  return access(path.c_str(), F_OK) == 0;
}

// --threads, 0 meaning all hardware threads; -1 after printing why it is
// bad.
int ThreadsFromFlags() {
  const int threads = absl::GetFlag(FLAGS_threads);
  if (threads < 0 || threads > 1024) {
    Fail(kExitUsage,
         absl::StrCat("--threads must be in 0..1024, got ", threads));
    return -1;
  }
  return threads > 0 ? threads
                     : static_cast<int>(
                           std::max(1u, std::thread::hardware_concurrency()));
}

// The engine flags shared by generate and serve (--model and --threads
// included); 0, or the exit code after printing what is wrong.
int EngineOptionsFromFlags(flotilla::coordinator::EngineOptions* out) {
  const std::string dir = absl::GetFlag(FLAGS_model);
  if (dir.empty()) return Fail(kExitUsage, "--model is required");
  const int threads = ThreadsFromFlags();
  if (threads < 0) return kExitUsage;
  const std::string simd_error =
      flotilla::kernels::UseSimdLevelNamed(absl::GetFlag(FLAGS_simd).c_str());
  if (!simd_error.empty()) return Fail(kExitUsage, "--simd: " + simd_error);
  flotilla::coordinator::EngineOptions& eo = *out;
  eo.model_dir = dir;
  eo.config_path = absl::GetFlag(FLAGS_config);
  eo.pack_dir = absl::GetFlag(FLAGS_pack);
  eo.mem = absl::GetFlag(FLAGS_mem);
  eo.threads = threads;
  eo.max_context = absl::GetFlag(FLAGS_max_context);
  eo.prefill_chunk = absl::GetFlag(FLAGS_prefill_chunk);
  eo.expert_prefetch = absl::GetFlag(FLAGS_expert_prefetch);
  eo.expert_prefetch_extra = absl::GetFlag(FLAGS_expert_prefetch_extra);
  if (eo.expert_prefetch_extra < 0 || eo.expert_prefetch_extra > 1024) {
    return Fail(kExitUsage,
                absl::StrCat("--expert-prefetch-extra must be in 0..1024, got ",
                             eo.expert_prefetch_extra));
  }
  eo.reader = absl::GetFlag(FLAGS_reader);
  eo.queue_depth = absl::GetFlag(FLAGS_queue_depth);
  eo.verify_checksums = absl::GetFlag(FLAGS_verify_checksums);
  for (absl::string_view w :
       absl::StrSplit(absl::GetFlag(FLAGS_workers), ',', absl::SkipEmpty())) {
    const absl::string_view trimmed = absl::StripAsciiWhitespace(w);
    eo.workers.emplace_back(trimmed.data(), trimmed.size());
  }
  eo.rpc_deadline_ms = absl::GetFlag(FLAGS_rpc_deadline_ms);
  eo.connect_timeout_ms = absl::GetFlag(FLAGS_connect_timeout_ms);
  eo.worker_tls.ca = absl::GetFlag(FLAGS_tls_ca);
  eo.worker_tls.cert = absl::GetFlag(FLAGS_tls_cert);
  eo.worker_tls.key = absl::GetFlag(FLAGS_tls_key);
  if (eo.rpc_deadline_ms < 1) {
    return Fail(kExitUsage, "--rpc-deadline-ms must be >= 1");
  }
  if (eo.connect_timeout_ms < 0) {
    return Fail(kExitUsage, "--connect-timeout-ms must be >= 0");
  }
  if (eo.worker_tls.cert.empty() != eo.worker_tls.key.empty()) {
    return Fail(kExitUsage, "--tls-cert and --tls-key go together");
  }
  eo.disk_gbps = absl::GetFlag(FLAGS_disk_gbps);
  eo.max_pinned_layers = absl::GetFlag(FLAGS_max_pinned_layers);
  eo.stream_vocab = absl::GetFlag(FLAGS_stream_vocab);
  {
    auto cache = flotilla::io::ParseByteSize(absl::GetFlag(FLAGS_expert_cache));
    if (!cache.ok())
      return Fail(kExitUsage,
                  absl::StrCat("--expert-cache: ", cache.status().message()));
    eo.expert_cache_bytes = *cache;
  }
  if (eo.max_context < 0 || eo.prefill_chunk < 0 || eo.queue_depth < 1 ||
      !(eo.disk_gbps > 0)) {
    return Fail(kExitUsage,
                "--queue-depth must be >= 1, --max-context (0 = the "
                "model's) and --prefill-chunk >= 0, --disk-gbps > 0");
  }
  return 0;
}

int RunGenerate() {
  using Clock = std::chrono::steady_clock;
  flotilla::coordinator::EngineOptions eo;
  if (int code = EngineOptionsFromFlags(&eo); code != 0) return code;
  const std::string dir = eo.model_dir;
  const int threads = eo.threads;
  if (absl::GetFlag(FLAGS_max_tokens) < 0) {
    return Fail(kExitUsage, "--max-tokens must be >= 0");
  }
  if (absl::GetFlag(FLAGS_metrics_linger_s) < 0) {
    return Fail(kExitUsage, "--metrics-linger-s must be >= 0");
  }
  if (absl::GetFlag(FLAGS_metrics_port) < -1 ||
      absl::GetFlag(FLAGS_metrics_port) > 65535) {
    return Fail(kExitUsage, "--metrics-port must be in -1..65535");
  }
  GenerateOptions options;
  options.max_tokens = absl::GetFlag(FLAGS_max_tokens);
  options.sampler.temperature =
      static_cast<float>(absl::GetFlag(FLAGS_temperature));
  options.sampler.top_k = absl::GetFlag(FLAGS_top_k);
  options.sampler.top_p = static_cast<float>(absl::GetFlag(FLAGS_top_p));
  options.sampler.seed = absl::GetFlag(FLAGS_seed);
  if (absl::Status s = ValidateSamplerOptions(options.sampler); !s.ok()) {
    return Fail(kExitUsage, std::string(s.message()));
  }
  if (!absl::GetFlag(FLAGS_stop_ids).empty()) {
    auto stops =
        flotilla::coordinator::ParseIdList(absl::GetFlag(FLAGS_stop_ids));
    if (!stops.ok())
      return Fail(kExitUsage,
                  absl::StrCat("--stop-ids: ", stops.status().message()));
    options.stop_ids = *stops;
  }
  options.keep_logits = !absl::GetFlag(FLAGS_dump_logits).empty();
  options.speculate = absl::GetFlag(FLAGS_speculate);
  options.draft_tokens = absl::GetFlag(FLAGS_draft_tokens);
  options.speculate_pay_check = !absl::GetFlag(FLAGS_speculate_always);
  if (!options.speculate.empty()) {
    if (auto d = flotilla::coordinator::MakeDrafter(options.speculate);
        !d.ok()) {
      return Fail(kExitUsage, std::string(d.status().message()));
    }
    if (options.draft_tokens < 1 || options.draft_tokens > 64) {
      return Fail(kExitUsage, "--draft-tokens must be in 1..64");
    }
  }
  if (absl::GetFlag(FLAGS_plan)) {
    double expert_gbps = absl::GetFlag(FLAGS_expert_disk_gbps);
    double single_gbps = absl::GetFlag(FLAGS_single_read_gbps);
    if (expert_gbps < 0 || single_gbps < 0) {
      return Fail(kExitUsage,
                  "--expert-disk-gbps and --single-read-gbps must be >= 0");
    }
    if (expert_gbps == 0) expert_gbps = eo.disk_gbps;
    if (single_gbps == 0) single_gbps = expert_gbps;
    flotilla::coordinator::SpeculationPlan spec;
    const double per_pass = absl::GetFlag(FLAGS_plan_tokens_per_pass);
    if (per_pass != 0) {
      spec.guesses = absl::GetFlag(FLAGS_draft_tokens);
      spec.tokens_per_pass = per_pass;
      if (spec.guesses < 1 || spec.guesses > 64 || !(per_pass >= 1) ||
          per_pass > spec.guesses + 1) {
        return Fail(kExitUsage,
                    "--plan-tokens-per-pass must be in 1 .. --draft-tokens + "
                    "1, with --draft-tokens in 1..64");
      }
    }
    auto report = flotilla::coordinator::PlanReport(
        eo, expert_gbps, single_gbps, absl::GetFlag(FLAGS_json), spec);
    if (!report.ok()) return Fail(kExitRuntime, report.status().ToString());
    std::fputs(report->c_str(), stdout);
    return 0;
  }

  // --prompt "" is a prompt (BOS alone for a tokenizer that adds one).
  const int sources = g_prompt_given +
                      !absl::GetFlag(FLAGS_prompt_file).empty() +
                      !absl::GetFlag(FLAGS_ids).empty();
  if (sources != 1) {
    return Fail(kExitUsage,
                "give exactly one of --prompt, --prompt-file or --ids");
  }
  const auto load_start = Clock::now();
  std::unique_ptr<flotilla::tokenizer::Tokenizer> tokenizer;
  if (FileExists(dir + "/tiktoken.model") ||
      FileExists(dir + "/tokenizer.json")) {
    auto tok = flotilla::tokenizer::Tokenizer::LoadDir(dir);
    if (!tok.ok()) return Fail(kExitRuntime, tok.status().ToString());
    tokenizer = std::move(*tok);
    if (!absl::GetFlag(FLAGS_ignore_eos)) {
      for (int32_t id : tokenizer->StopIds()) options.stop_ids.push_back(id);
    }
  }
  // A draft model's budget comes out of --mem: opened first, the model
  // gets what is left.
  absl::StatusOr<std::unique_ptr<flotilla::coordinator::Engine>> draft;
  if (!absl::GetFlag(FLAGS_draft_model).empty()) {
    if (!options.speculate.empty()) {
      return Fail(kExitUsage, "give --speculate or --draft-model, not both");
    }
    auto total = flotilla::io::ResolveBudget(eo.mem);
    auto share = flotilla::io::ResolveBudget(absl::GetFlag(FLAGS_draft_mem));
    if (!total.ok() || !share.ok() || *share >= *total) {
      return Fail(kExitUsage,
                  absl::StrCat("--draft-mem (", absl::GetFlag(FLAGS_draft_mem),
                               ") must be a size below --mem (", eo.mem, ")"));
    }
    eo.mem = absl::StrCat(*total - *share);
    if (absl::Status same = flotilla::coordinator::CheckDraftTokenizer(
            dir, absl::GetFlag(FLAGS_draft_model));
        !same.ok()) {
      return Fail(kExitUsage, std::string(same.message()));
    }
    flotilla::coordinator::EngineOptions d;
    d.model_dir = absl::GetFlag(FLAGS_draft_model);
    d.mem = absl::GetFlag(FLAGS_draft_mem);
    d.threads = eo.threads;
    draft = flotilla::coordinator::OpenEngine(d);
    if (!draft.ok()) {
      return Fail(kExitRuntime,
                  absl::StrCat("--draft-model: ", draft.status().ToString()));
    }
  }
  auto engine = flotilla::coordinator::OpenEngine(eo);
  if (!engine.ok()) return Fail(kExitRuntime, engine.status().ToString());
  auto* model = &(*engine)->model;
  if (!absl::GetFlag(FLAGS_draft_model).empty()) {
    auto drafter = flotilla::coordinator::ModelDrafter::Create(
        std::move(*draft), (*model)->vocab_size());
    if (!drafter.ok()) return Fail(kExitUsage, drafter.status().ToString());
    std::shared_ptr<flotilla::coordinator::Drafter> guesser(
        std::move(*drafter));
    options.drafter =
        options.speculate_pay_check
            ? std::make_shared<flotilla::coordinator::PayingDrafter>(guesser)
            : guesser;
    if (options.draft_tokens < 1 || options.draft_tokens > 64) {
      return Fail(kExitUsage, "--draft-tokens must be in 1..64");
    }
  }
  options.prefill_chunk = eo.prefill_chunk;
  const double load_seconds = flotilla::base::SecondsSince(load_start);
  if (!absl::GetFlag(FLAGS_json) && (*engine)->streaming) {
    std::fputs((*engine)->plan.ToString().c_str(), stderr);
  }

  std::vector<int32_t> prompt;
  if (!absl::GetFlag(FLAGS_ids).empty()) {
    auto ids = flotilla::coordinator::ParseIdList(absl::GetFlag(FLAGS_ids));
    if (!ids.ok())
      return Fail(kExitUsage, absl::StrCat("--ids: ", ids.status().message()));
    prompt = *ids;
  } else {
    std::string text = absl::GetFlag(FLAGS_prompt);
    if (!absl::GetFlag(FLAGS_prompt_file).empty()) {
      auto file =
          flotilla::base::ReadWholeFile(absl::GetFlag(FLAGS_prompt_file));
      if (!file.ok())
        return Fail(kExitUsage,
                    absl::StrCat("--prompt-file: ", file.status().message()));
      text = *file;
    }
    if (tokenizer == nullptr) {
      return Fail(kExitUsage,
                  absl::StrCat("model ", dir,
                               " has no tokenizer (tiktoken.model or "
                               "tokenizer.json); pass the prompt as --ids"));
    }
    prompt = tokenizer->Encode(text);
  }

  const bool json = absl::GetFlag(FLAGS_json);
  flotilla::coordinator::Engine& eng = **engine;
  // Decode-phase counters: one snapshot as each token is returned, shared
  // by --stats and --metrics-port so that both count the same bytes (the
  // trunk ring reads ahead on its own threads: two snapshots taken one
  // after the other can differ by a layer).
  flotilla::coordinator::RunCounters at_decode;
  flotilla::coordinator::RunCounters at_last_token;
  bool first_token = true;
  std::unique_ptr<flotilla::tokenizer::StreamDecoder> stream;
  if (tokenizer != nullptr) {
    stream =
        std::make_unique<flotilla::tokenizer::StreamDecoder>(tokenizer.get());
    // Text mode echoes the prompt, so the output reads as one text.
    if (!json) {
      for (int32_t id : prompt) {
        auto piece = stream->Next(id);
        if (piece.ok()) std::fwrite(piece->data(), 1, piece->size(), stdout);
      }
    }
  }
  // --metrics-port: the engine's metrics while it generates, each token's
  // step reported as it ends (the first one is the prefill).
  auto registry = std::make_shared<prometheus::Registry>();
  flotilla::metrics::AddBuildInfo(*registry, "coordinator");
  flotilla::coordinator::EngineMetrics engine_metrics(*registry);
  std::unique_ptr<flotilla::metrics::MetricsServer> metrics_server;
  if (const int port = absl::GetFlag(FLAGS_metrics_port); port >= 0) {
    engine_metrics.Memory(eng);
    engine_metrics.Baseline(flotilla::coordinator::SnapshotCounters(eng));
    auto started = flotilla::metrics::MetricsServer::Start(
        absl::GetFlag(FLAGS_host), port, registry);
    if (!started.ok()) return Fail(kExitRuntime, started.status().ToString());
    metrics_server = *std::move(started);
    std::fprintf(stderr, "[flotilla] metrics on http://%s:%d/metrics\n",
                 absl::GetFlag(FLAGS_host).c_str(), metrics_server->port());
  }
  auto step_start = std::chrono::steady_clock::now();
  auto on_token = [&](int32_t id) {
    at_last_token = flotilla::coordinator::SnapshotCounters(eng);
    if (metrics_server != nullptr) {
      // The first token's step fed the prompt (chunked prefill steps are
      // one step here: the pass up to the first token).
      engine_metrics.Step(at_last_token, first_token ? prompt.size() : 0, 1,
                          flotilla::base::SecondsSince(step_start));
      step_start = std::chrono::steady_clock::now();
    }
    if (first_token) {
      first_token = false;
      at_decode = at_last_token;
    }
    if (json) return true;
    if (stream != nullptr) {
      // Text is printed once its characters are complete (a token may end
      // inside one).
      auto piece = stream->Next(id);
      if (piece.ok()) std::fwrite(piece->data(), 1, piece->size(), stdout);
    } else {
      std::printf("%d ", id);
    }
    std::fflush(stdout);
    return true;
  };
  auto result = Generate(**model, prompt, options, on_token);
  if (!result.ok()) return Fail(kExitRuntime, result.status().ToString());
  if (options.keep_logits) {
    if (absl::Status s = flotilla::coordinator::WriteLogits(
            absl::GetFlag(FLAGS_dump_logits), *result);
        !s.ok()) {
      return Fail(kExitRuntime, s.ToString());
    }
  }
  const size_t n_gen = result->generated_ids.size();
  // Per decoded token (the prefill is reported separately).
  const nlohmann::json stats = flotilla::coordinator::DecodeStats(
      eng, at_decode, at_last_token, *result);
  if (json) {
    flotilla::coordinator::RunSummary run;
    run.model_dir = dir;
    run.prompt = prompt;
    run.threads = threads;
    run.load_seconds = load_seconds;
    run.trunk_bytes = (*model)->resident_trunk_bytes();
    std::string text;
    if (tokenizer != nullptr) {
      auto decoded = tokenizer->Decode(result->generated_ids);
      if (!decoded.ok()) return Fail(kExitRuntime, decoded.status().ToString());
      text = *std::move(decoded);
      run.text = &text;
    }
    const nlohmann::json out =
        flotilla::coordinator::GenerationJson(run, *result, stats);
    // Generated bytes may be invalid UTF-8 (a token can end mid-character):
    // such bytes become U+FFFD in the JSON text.
    std::printf("%s\n", out.dump(-1, ' ', false,
                                 nlohmann::json::error_handler_t::replace)
                            .c_str());
  } else {
    if (stream != nullptr) {
      auto rest = stream->Finish();
      if (rest.ok()) std::fwrite(rest->data(), 1, rest->size(), stdout);
    }
    std::printf("\n");
    std::fflush(stdout);  // the text first, then the summary on stderr
    std::fprintf(
        stderr,
        "[flotilla] prompt %zu tokens, generated %zu (%s); load %.3f s, "
        "prefill %.3f s, decode %.3f s\n",
        prompt.size(), n_gen, result->finish_reason.c_str(), load_seconds,
        result->prefill_seconds, result->decode_seconds);
    if (absl::GetFlag(FLAGS_stats)) {
      std::fprintf(stderr, "[flotilla] stats per decoded token: %s\n",
                   stats.dump(1).c_str());
    }
  }
  if (metrics_server != nullptr) {
    const double linger = absl::GetFlag(FLAGS_metrics_linger_s);
    if (linger > 0) {
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::duration<double>(linger));
    }
  }
  return 0;
}

int RunServeFromFlags() {
  flotilla::coordinator::EngineOptions eo;
  if (int code = EngineOptionsFromFlags(&eo); code != 0) return code;
  return flotilla::coordinator::RunServe(eo);
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return kExitUsage;
  }
  if (flotilla::cli::WantsHelp(argc, argv)) {
    std::fputs(kUsage, stdout);
    flotilla::cli::PrintFlags(stdout, {"coordinator/"});
    return 0;
  }
  if (flotilla::cli::WantsVersion(argc, argv)) {
    std::printf("flotilla-coordinator %s\n", flotilla::cli::Version());
    return 0;
  }
  const std::string command = argv[1];
  if (command != "generate" && command != "serve" && command != "health") {
    return Fail(kExitUsage,
                absl::StrCat("unknown command '", command,
                             "' (expected: generate, serve or health)"));
  }
  // The documented flags use dashes (--max-tokens); absl names use
  // underscores. Translate flag names, never values.
  std::vector<std::string> args;
  args.push_back(argv[0]);
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) == 0) {
      const size_t end = std::min(arg.find('='), arg.size());
      if (arg.compare(0, end, "--prompt") == 0) g_prompt_given = true;
      for (size_t j = 2; j < end; ++j) {
        if (arg[j] == '-') arg[j] = '_';
      }
    }
    args.push_back(std::move(arg));
  }
  std::vector<char*> new_argv;
  for (std::string& a : args) new_argv.push_back(a.data());
  new_argv.push_back(nullptr);
  // absl parses everything after the subcommand; an unknown flag is fatal
  // there with a message naming it.
  absl::ParseCommandLine(static_cast<int>(args.size()), new_argv.data());
  if (command == "health") return flotilla::coordinator::RunHealth();
  return command == "serve" ? RunServeFromFlags() : RunGenerate();
}
