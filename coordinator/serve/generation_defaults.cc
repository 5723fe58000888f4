#include "coordinator/serve/generation_defaults.h"

#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "shared/model/json_util.h"

namespace flotilla::coordinator::serve {
namespace {

// j[key] as a finite number in [lo, hi], or absent (false).
absl::StatusOr<bool> SamplingField(const nlohmann::json& j, const char* key,
                                   double lo, double hi,
                                   const std::string& path, double* out) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return false;
  if (!it->is_number() || !std::isfinite(it->get<double>()) ||
      it->get<double>() < lo || it->get<double>() > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", key, " must be a number in ", lo, "..", hi,
                     ", got ", it->dump()));
  }
  *out = it->get<double>();
  return true;
}

}  // namespace

absl::StatusOr<GenerationDefaults> LoadGenerationDefaults(
    const std::string& model_dir) {
  GenerationDefaults d;
  const std::string path = model_dir + "/generation_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    d.description = "greedy (no generation_config.json)";
    return d;
  }
  absl::StatusOr<std::string> text = model::internal::ReadSmallFile(path);
  if (!text.ok()) return text.status();
  auto parsed = model::internal::ParseJson(*text, path);
  if (!parsed.ok()) return parsed.status();
  if (!parsed->is_object()) {
    return absl::InvalidArgumentError(path + ": must be a JSON object");
  }
  const nlohmann::json& j = *parsed;
  const auto sample = j.find("do_sample");
  if (sample != j.end() && !sample->is_null() && !sample->is_boolean()) {
    return absl::InvalidArgumentError(path + ": do_sample must be a boolean");
  }
  double v = 0;
  std::string said;
  absl::StatusOr<bool> has = SamplingField(j, "temperature", 0, 100, path, &v);
  if (!has.ok()) return has.status();
  if (*has) {
    d.sampler.temperature = static_cast<float>(v);
    absl::StrAppend(&said, " temperature ", v);
  }
  if (has = SamplingField(j, "top_p", 1e-9, 1, path, &v); !has.ok()) {
    return has.status();
  } else if (*has) {
    d.sampler.top_p = static_cast<float>(v);
    absl::StrAppend(&said, " top_p ", v);
  }
  if (has = SamplingField(j, "top_k", 0, 1 << 20, path, &v); !has.ok()) {
    return has.status();
  } else if (*has) {
    if (v != std::floor(v)) {
      return absl::InvalidArgumentError(path + ": top_k must be an integer");
    }
    d.sampler.top_k = static_cast<int>(v);
    absl::StrAppend(&said, " top_k ", v);
  }
  if (has = SamplingField(j, "min_p", 0, 1, path, &v); !has.ok()) {
    return has.status();
  } else if (*has) {
    d.sampler.min_p = static_cast<float>(v);
    absl::StrAppend(&said, " min_p ", v);
  }
  if (has = SamplingField(j, "repetition_penalty", 1e-9, 100, path, &v);
      !has.ok()) {
    return has.status();
  } else if (*has) {
    d.sampler.repetition_penalty = static_cast<float>(v);
    absl::StrAppend(&said, " repetition_penalty ", v);
  }
  // Hugging Face's rule: without do_sample: true a release generates
  // greedily whatever temperature it lists.
  const bool samples =
      sample != j.end() && sample->is_boolean() && sample->get<bool>();
  if (!samples) {
    d.sampler = SamplerOptions();
    d.description = "greedy (generation_config.json: do_sample is not true)";
    return d;
  }
  d.description = said.empty()
                      ? "generation_config.json: do_sample with no values "
                        "(temperature 0: greedy)"
                      : absl::StrCat("generation_config.json:", said);
  return d;
}

}  // namespace flotilla::coordinator::serve
