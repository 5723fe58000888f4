// A release's recommended sampling, from its generation_config.json
// (Qwen3: temperature 0.6, top_p 0.95, top_k 20), used for every request
// field the client leaves out, as vLLM does. Without the file, or with
// "do_sample": false, the default is greedy (temperature 0).
#ifndef FLOTILLA_COORDINATOR_SERVE_GENERATION_DEFAULTS_H_
#define FLOTILLA_COORDINATOR_SERVE_GENERATION_DEFAULTS_H_

#include <string>

#include "absl/status/statusor.h"
#include "coordinator/sampler.h"

namespace flotilla::coordinator::serve {

struct GenerationDefaults {
  SamplerOptions sampler;   // temperature, top_p, top_k, min_p, penalty
  std::string description;  // for the startup line
};

// Reads <model_dir>/generation_config.json (absent: greedy). A field of the
// wrong type or out of range is InvalidArgument naming it.
absl::StatusOr<GenerationDefaults> LoadGenerationDefaults(
    const std::string& model_dir);

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_GENERATION_DEFAULTS_H_
