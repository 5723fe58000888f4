// The cost per token of constrained decoding: JsonConstraint::Mask over a
// whole vocabulary at typical states of a JSON reply, against what every
// token costs anyway (copying the logits and sampling them). Run with the
// tokenizer of the model that matters; its vocabulary size sets the cost.
//
//   build/bin/flotilla-bench-constrained MODEL_OR_TOKENIZER_DIR \
//     --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// (default: the embedded stories model, 512 tokens; a Qwen3
// tokenizer.json folder has 151,669)
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "coordinator/constrained/token_constraint.h"
#include "coordinator/sampler.h"
#include "nlohmann/json.hpp"
#include "shared/tokenizer/tokenizer.h"

namespace flotilla::coordinator::constrained {
namespace {

std::string g_dir = FLOTILLA_STORIES_DIR;

struct Setup {
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  std::shared_ptr<const TokenPieces> pieces;
  std::shared_ptr<const CompiledSchema> schema;
  std::vector<float> logits;
};

Setup& Get() {
  static Setup* setup = [] {
    auto s = new Setup;
    auto t = tokenizer::Tokenizer::LoadDir(g_dir);
    if (!t.ok()) {
      std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
      std::exit(1);
    }
    s->tokenizer = *std::move(t);
    s->pieces = *TokenPieces::Build(*s->tokenizer);
    s->schema = std::make_shared<const CompiledSchema>(*CompiledSchema::Compile(
        nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
          "name": {"type": "string"}, "age": {"type": "integer"},
          "tags": {"type": "array", "items": {"type": "string"}}},
          "required": ["name", "age", "tags"], "additionalProperties": false})")));
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0, 3);
    s->logits.resize(s->tokenizer->vocab_size());
    for (float& x : s->logits) x = normal(rng);
    std::fprintf(stderr, "vocabulary: %d tokens (%s)\n",
                 s->tokenizer->vocab_size(), g_dir.c_str());
    return s;
  }();
  return *setup;
}

// The mask after `prefix` (fed token by token as bytes), with a budget of
// 256 tokens left.
void BM_Mask(benchmark::State& state, const char* prefix) {
  Setup& s = Get();
  const int vocab = s.tokenizer->vocab_size();
  JsonConstraint c(s.schema, s.pieces);
  // Reach the state through single-byte tokens of the prefix.
  for (const char ch : std::string(prefix)) {
    for (int32_t id = 0; id < vocab; ++id) {
      if (s.pieces->piece(id) == std::string(1, ch)) {
        c.Accept(id);
        break;
      }
    }
  }
  std::vector<float> logits;
  for (auto _ : state) {
    logits = s.logits;
    c.Mask(logits.data(), vocab, 256);
    benchmark::DoNotOptimize(logits.data());
  }
}
BENCHMARK_CAPTURE(BM_Mask, start, "")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Mask, key, "{\"na")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Mask, in_string, "{\"name\":\"Ann")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Mask, in_number, "{\"name\":\"A\",\"age\":4")
    ->Unit(benchmark::kMicrosecond);

// What every token costs without a constraint: the logits copied (as the
// serving loop hands them over) and sampled at temperature 1.
void BM_SampleOnly(benchmark::State& state) {
  Setup& s = Get();
  SamplerOptions o;
  o.temperature = 1;
  Sampler sampler(o);
  std::vector<float> logits;
  for (auto _ : state) {
    logits = s.logits;
    benchmark::DoNotOptimize(sampler.Sample(logits.data(), logits.size()));
  }
}
BENCHMARK(BM_SampleOnly)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace flotilla::coordinator::constrained

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (argc > 1) flotilla::coordinator::constrained::g_dir = argv[1];
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
