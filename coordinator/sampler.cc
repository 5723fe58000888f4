#include "coordinator/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shared/base/check.h"

namespace flotilla::coordinator {
namespace {

// A candidate token during random sampling: unnormalized probability
// exp((logit - max) / T) in double, and its id.
struct Candidate {
  double weight;
  int32_t id;
};

// Uniform double in [0, 1) from the top 53 bits of one 64-bit draw.
// std::uniform_real_distribution is implementation-defined (libstdc++ and
// libc++ differ, and libstdc++ changed across versions), so a seed would not
// reproduce the same tokens everywhere; this conversion is exact and fixed.
double UniformDouble(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

}  // namespace

absl::Status ValidateSamplerOptions(const SamplerOptions& options) {
  if (!std::isfinite(options.temperature) || options.temperature < 0.0f) {
    return absl::InvalidArgumentError(absl::StrCat(
        "temperature must be a finite number >= 0, got ", options.temperature));
  }
  if (options.top_k < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "top_k must be >= 0 (0 disables the cut), got ", options.top_k));
  }
  // Written so that NaN fails too: every comparison with NaN is false.
  if (!(options.top_p > 0.0f && options.top_p <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "top_p must be in (0, 1] (1 disables the cut), got ", options.top_p));
  }
  if (!(options.min_p >= 0.0f && options.min_p <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_p must be in [0, 1] (0 disables the cut), got ", options.min_p));
  }
  for (const auto& [name, value] :
       {std::pair<const char*, float>{"presence_penalty",
                                      options.presence_penalty},
        {"frequency_penalty", options.frequency_penalty}}) {
    if (!(value >= -2.0f && value <= 2.0f)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " must be in [-2, 2], got ", value));
    }
  }
  if (!(options.repetition_penalty > 0.0f &&
        std::isfinite(options.repetition_penalty))) {
    return absl::InvalidArgumentError(
        absl::StrCat("repetition_penalty must be a finite number > 0 (1 "
                     "disables it), got ",
                     options.repetition_penalty));
  }
  for (const auto& [id, bias] : options.logit_bias) {
    if (id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("logit_bias: token id ", id, " is negative"));
    }
    if (!(bias >= -100.0f && bias <= 100.0f)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "logit_bias: the bias of token ", id, " must be in [-100, 100]"));
    }
  }
  return absl::OkStatus();
}

Sampler::Sampler(const SamplerOptions& options,
                 const std::vector<int32_t>& prompt)
    : options_(options), rng_(options.seed) {
  // Options come from users; callers validate them and report the error.
  // Reaching here with bad options is a programmer error.
  FLOTILLA_CHECK(ValidateSamplerOptions(options).ok());
  if (options_.repetition_penalty != 1.0f) {
    seen_.insert(prompt.begin(), prompt.end());
  }
}

void Sampler::Accept(int32_t id) {
  if (!options_.Adjusts()) return;
  ++generated_[id];
  seen_.insert(id);
}

const float* Sampler::Adjust(const float* logits, int vocab) {
  adjusted_.assign(logits, logits + vocab);
  float* z = adjusted_.data();
  for (const auto& [id, count] : generated_) {
    if (id < 0 || id >= vocab) continue;
    z[id] -= options_.presence_penalty +
             options_.frequency_penalty * static_cast<float>(count);
  }
  if (options_.repetition_penalty != 1.0f) {
    for (int32_t id : seen_) {
      if (id < 0 || id >= vocab) continue;
      z[id] = z[id] > 0.0f ? z[id] / options_.repetition_penalty
                           : z[id] * options_.repetition_penalty;
    }
  }
  for (const auto& [id, bias] : options_.logit_bias) {
    if (id < vocab) z[id] += bias;
  }
  return z;
}

int32_t Argmax(const float* logits, int vocab) {
  FLOTILLA_CHECK(logits != nullptr && vocab > 0);
  int32_t best = -1;
  for (int32_t i = 0; i < vocab; ++i) {
    if (!std::isfinite(logits[i])) continue;
    // Strict '>' keeps the lowest index among equal maxima.
    if (best < 0 || logits[i] > logits[best]) best = i;
  }
  return best < 0 ? 0 : best;
}

int32_t Sampler::Sample(const float* raw, int vocab) {
  FLOTILLA_CHECK(raw != nullptr && vocab > 0);
  // Unadjusted, the row is read where it is (no copy per token).
  const float* logits = options_.Adjusts() ? Adjust(raw, vocab) : raw;
  if (options_.temperature == 0.0f) return Argmax(logits, vocab);

  // Exactly one draw per sampled token, taken before any early return, so
  // the random stream position depends only on how many tokens were
  // sampled, never on the logits or on which cuts applied.
  const double u = UniformDouble(rng_);

  const int32_t best = Argmax(logits, vocab);
  if (!std::isfinite(logits[best])) return 0;  // every logit non-finite
  const double inv_t = 1.0 / static_cast<double>(options_.temperature);
  const double max_z = static_cast<double>(logits[best]) * inv_t;

  // Softmax numerators in double, shifted by the maximum so the largest is
  // exactly 1 and nothing overflows. Normalization is deferred: every cut
  // below is scale-invariant, and dividing once at the end saves a pass.
  std::vector<Candidate> candidates;
  candidates.reserve(static_cast<size_t>(vocab));
  for (int32_t i = 0; i < vocab; ++i) {
    if (!std::isfinite(logits[i])) continue;
    const double w = std::exp(static_cast<double>(logits[i]) * inv_t - max_z);
    if (w > 0.0) candidates.push_back({w, i});
  }

  // Descending probability, ties to the lower id: a total order, so the
  // walk below (and hence the token for a given draw) is deterministic.
  const auto by_prob = [](const Candidate& a, const Candidate& b) {
    return a.weight != b.weight ? a.weight > b.weight : a.id < b.id;
  };
  size_t keep = candidates.size();
  if (options_.top_k > 0 && static_cast<size_t>(options_.top_k) < keep) {
    keep = static_cast<size_t>(options_.top_k);
    std::partial_sort(candidates.begin(), candidates.begin() + keep,
                      candidates.end(), by_prob);
  } else {
    std::sort(candidates.begin(), candidates.end(), by_prob);
  }

  // min-p: weights are relative to the top token's (which is 1), so the
  // cut keeps those at or above min_p; the top token always survives.
  if (options_.min_p > 0.0f) {
    size_t kept = 1;
    while (kept < keep &&
           candidates[kept].weight >= static_cast<double>(options_.min_p)) {
      ++kept;
    }
    keep = kept;
  }

  // Mass of the kept set, summed in sorted order (a fixed reduction order).
  double mass = 0.0;
  for (size_t i = 0; i < keep; ++i) mass += candidates[i].weight;

  // Nucleus: the smallest prefix whose probability (relative to the top-k
  // set) reaches top_p. At least one candidate always survives.
  if (options_.top_p < 1.0f) {
    const double target = static_cast<double>(options_.top_p) * mass;
    double cumulative = 0.0;
    size_t prefix = 0;
    while (prefix < keep) {
      cumulative += candidates[prefix].weight;
      ++prefix;
      if (cumulative >= target) break;
    }
    keep = prefix;
    mass = cumulative;
  }

  // Inverse-CDF walk over the kept candidates, renormalized to their mass.
  const double threshold = u * mass;
  double cumulative = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    cumulative += candidates[i].weight;
    if (threshold < cumulative) return candidates[i].id;
  }
  // Rounding can leave threshold == mass; the last kept token owns that edge.
  return candidates[keep - 1].id;
}

}  // namespace flotilla::coordinator
