#include "coordinator/model/yarn_rope.h"

#include <algorithm>
#include <cmath>

namespace flotilla::coordinator {
namespace {

// The dimension at which `rotations` full turns fit the original context.
double CorrectionDim(double rotations, const YarnParams& p) {
  return p.dim * std::log(p.original_max_position / (rotations * 2 * M_PI)) /
         (2 * std::log(p.theta));
}

double GetMscale(double f, double m) {
  return f <= 1 ? 1.0 : 0.1 * m * std::log(f) + 1.0;
}

}  // namespace

std::vector<float> YarnInvFreq(const YarnParams& p) {
  const int half = p.dim / 2;
  double low = CorrectionDim(p.beta_fast, p);
  double high = CorrectionDim(p.beta_slow, p);
  if (p.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(p.dim - 1));
  if (low == high) high += 0.001;
  std::vector<float> inv(half);
  for (int i = 0; i < half; ++i) {
    // float32 throughout, as torch computes it: base ** (2i / dim).
    // theta ** (2i / dim) rounded once to float32 (torch's float pow is
    // within an ulp of that; computing it in float instead misses by one
    // at some i).
    const float pos = static_cast<float>(
        std::pow(static_cast<double>(static_cast<float>(p.theta)),
                 static_cast<double>(static_cast<float>(2 * i) /
                                     static_cast<float>(p.dim))));
    const float extrapolation = 1.0f / pos;
    const float interpolation = 1.0f / (static_cast<float>(p.factor) * pos);
    // torch: (arange(dim // 2, float32) - low) / (high - low), the Python
    // floats taken as float32 scalars (the difference made in double).
    const float ramp =
        std::clamp((static_cast<float>(i) - static_cast<float>(low)) /
                       static_cast<float>(high - low),
                   0.0f, 1.0f);
    const float keep = 1.0f - ramp;  // upstream's extrapolation factor
    inv[i] = interpolation * (1.0f - keep) + extrapolation * keep;
  }
  return inv;
}

float YarnAttentionFactor(const YarnParams& p) {
  return static_cast<float>(GetMscale(p.factor, p.mscale) /
                            GetMscale(p.factor, p.mscale_all_dim));
}

}  // namespace flotilla::coordinator
