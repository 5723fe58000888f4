// The shared grouped-query attention block's options against direct
// computations: gpt-oss's sinks (one more softmax logit per head, its
// column dropped), the RoPE factor on cos/sin (YaRN), the sliding window,
// and Qwen3's per-head q/k norms. RoPE is made the identity (all
// frequencies 0) where a check is about something else.
#include "coordinator/model/gqa_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "shared/kernels/kernels.h"
#include "shared/kernels/thread_pool.h"

namespace flotilla::coordinator {
namespace {

constexpr int kD = 4;

// Attention of one query head over keys/values [n][kD] with `sink` (or
// none), in double: softmax over [scores, sink], the sink column dropped.
std::vector<double> Direct(const std::vector<float>& q,
                           const std::vector<std::vector<float>>& k,
                           const std::vector<std::vector<float>>& v,
                           const double* sink) {
  std::vector<double> s;
  for (const auto& kj : k) {
    double dot = 0;
    for (int i = 0; i < kD; ++i) dot += static_cast<double>(q[i]) * kj[i];
    s.push_back(dot / std::sqrt(kD));
  }
  double m = sink != nullptr ? *sink : -1e300;
  for (double x : s) m = std::max(m, x);
  double total = sink != nullptr ? std::exp(*sink - m) : 0;
  for (double& x : s) total += (x = std::exp(x - m));
  std::vector<double> out(kD, 0);
  for (size_t j = 0; j < s.size(); ++j) {
    for (int i = 0; i < kD; ++i) out[i] += s[j] / total * v[j][i];
  }
  return out;
}

GqaSpec NoRope(int window) {
  GqaSpec s{2, 1, kD, 10000, window};
  s.inv_freq.assign(kD / 2, 0.0f);  // angle 0: the rotation is the identity
  return s;
}

TEST(GqaAttentionTest, SinksTakeTheirShareAndTheWindowCutsKeys) {
  // Three tokens, two query heads over one kv head.
  std::vector<float> q = {0.3f, -1.2f, 0.5f, 0.9f, -0.7f, 0.4f,
                          1.1f, -0.2f, 1.0f, 0.2f, -0.4f, 0.6f,
                          0.8f, -0.9f, 0.3f, 0.5f, -0.5f, 0.7f,
                          0.2f, -1.0f, 0.1f, 0.6f, -0.8f, 0.4f};
  std::vector<float> k = {0.5f, 0.1f, -0.3f, 0.8f,  -0.6f, 0.9f,
                          0.2f, 0.4f, 1.2f,  -0.7f, 0.3f,  0.1f};
  const std::vector<float> v = {1, 2, 3, 4, -1, 0.5f, 2, 0, 0.3f, -2, 1, 1};
  const float sinks[2] = {0.8f, -1.5f};
  const std::vector<std::vector<float>> keys = {{k.begin(), k.begin() + 4},
                                                {k.begin() + 4, k.begin() + 8},
                                                {k.begin() + 8, k.end()}};
  const std::vector<std::vector<float>> values = {
      {v.begin(), v.begin() + 4},
      {v.begin() + 4, v.begin() + 8},
      {v.begin() + 8, v.end()}};
  for (int window : {0, 2}) {
    SCOPED_TRACE(window);
    GqaAttention a(NoRope(window));
    std::vector<float> qq = q, kk = k, cache_k, cache_v, attn(3 * 2 * kD);
    a.Attend(qq.data(), kk.data(), v.data(), 3, 0, &cache_k, &cache_v,
             attn.data(), {}, sinks);
    for (int h = 0; h < 2; ++h) {
      const double sink = sinks[h];
      const std::vector<float> qh(q.begin() + (2 * 2 + h) * kD,
                                  q.begin() + (2 * 2 + h + 1) * kD);
      const size_t first = window > 0 ? 3 - window : 0;
      const std::vector<std::vector<float>> kw(keys.begin() + first,
                                               keys.end()),
          vw(values.begin() + first, values.end());
      const std::vector<double> want = Direct(qh, kw, vw, &sink);
      for (int i = 0; i < kD; ++i) {
        EXPECT_NEAR(attn[(2 * 2 + h) * kD + i], want[i], 1e-6) << h << i;
      }
    }
  }
}

// A factor f on cos and sin scales each rotated query and key by f, so the
// logits by f^2: the same as unit RoPE on queries and keys scaled by f.
TEST(GqaAttentionTest, RopeFactorScalesQueriesAndKeys) {
  GqaSpec scaled = NoRope(0);
  scaled.rope_factor = 1.5f;
  std::vector<float> q = {0.3f, -1.2f, 0.5f,  0.9f, -0.7f, 0.4f,  1.1f, -0.2f,
                          1.0f, 0.2f,  -0.4f, 0.6f, 0.8f,  -0.9f, 0.3f, 0.5f};
  std::vector<float> k = {0.5f, 0.1f, -0.3f, 0.8f, -0.6f, 0.9f, 0.2f, 0.4f};
  const std::vector<float> v = {1, 2, 3, 4, -1, 0.5f, 2, 0};
  std::vector<float> q2 = q, k2 = k;
  for (float& x : q2) x *= 1.5f;
  for (float& x : k2) x *= 1.5f;
  std::vector<float> ck, cv, a1(2 * 2 * kD), a2(2 * 2 * kD);
  GqaAttention(scaled).Attend(q.data(), k.data(), v.data(), 2, 0, &ck, &cv,
                              a1.data());
  ck.clear();
  cv.clear();
  GqaAttention(NoRope(0)).Attend(q2.data(), k2.data(), v.data(), 2, 0, &ck, &cv,
                                 a2.data());
  for (size_t i = 0; i < a1.size(); ++i) EXPECT_NEAR(a1[i], a2[i], 1e-6) << i;
}

// Per-head q/k norms: the same as normalising the heads before the call.
TEST(GqaAttentionTest, QkNormsEqualNormalisingFirst) {
  std::vector<float> q = {0.3f, -1.2f, 0.5f, 0.9f, -0.7f, 0.4f, 1.1f, -0.2f};
  std::vector<float> k = {0.5f, 0.1f, -0.3f, 0.8f};
  const std::vector<float> v = {1, 2, 3, 4};
  const float wq[kD] = {1.0f, 0.5f, 2.0f, 1.5f}, wk[kD] = {0.7f, 1.2f, 1, 0.9f};
  std::vector<float> qn = q, kn = k;
  auto norm = [](float* x, const float* w) {
    double ss = 0;
    for (int i = 0; i < kD; ++i) ss += static_cast<double>(x[i]) * x[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / kD + 1e-6));
    for (int i = 0; i < kD; ++i) x[i] = w[i] * (x[i] * inv);
  };
  norm(qn.data(), wq);
  norm(qn.data() + kD, wq);
  norm(kn.data(), wk);
  std::vector<float> ck, cv, a1(2 * kD), a2(2 * kD);
  GqaAttention(NoRope(0)).Attend(q.data(), k.data(), v.data(), 1, 0, &ck, &cv,
                                 a1.data(), QkNorm{wq, wk, 1e-6f});
  ck.clear();
  cv.clear();
  GqaAttention(NoRope(0)).Attend(qn.data(), kn.data(), v.data(), 1, 0, &ck, &cv,
                                 a2.data());
  for (size_t i = 0; i < a1.size(); ++i) EXPECT_NEAR(a1[i], a2[i], 1e-6) << i;
}

// A sliding layer's cache trimmed to the window after every step gives
// bitwise the outputs of one that keeps every position, and holds W - 1
// rows, whatever the context.
TEST(GqaAttentionTest, TrimmingToTheWindowKeepsTheOutputsBitwise) {
  const int window = 3;
  GqaSpec spec{2, 1, kD, 10000, window};  // real RoPE: positions matter
  GqaAttention a(spec);
  std::vector<float> kept_k, kept_v, trim_k, trim_v;
  size_t first = 0;
  for (size_t pos = 0; pos < 9; ++pos) {
    std::vector<float> q(2 * kD), k(kD), v(kD);
    for (int i = 0; i < 2 * kD; ++i) q[i] = std::sin(0.7f * pos + i);
    for (int i = 0; i < kD; ++i) {
      k[i] = std::cos(0.3f * pos - i);
      v[i] = 0.1f * pos + i;
    }
    std::vector<float> q2 = q, k2 = k, full(2 * kD), trimmed(2 * kD);
    a.Attend(q.data(), k.data(), v.data(), 1, pos, &kept_k, &kept_v,
             full.data());
    a.Attend(q2.data(), k2.data(), v.data(), 1, pos, &trim_k, &trim_v,
             trimmed.data(), {}, nullptr, first);
    a.TrimToWindow(pos + 1, &trim_k, &trim_v, &first);
    EXPECT_EQ(full, trimmed) << pos;
    const size_t rows = std::min<size_t>(pos + 1, window - 1);
    EXPECT_EQ(trim_k.size(), rows * kD) << pos;
    EXPECT_EQ(first, pos + 1 - rows) << pos;
  }
  EXPECT_EQ(kept_k.size(), 9u * kD);
}

// The heads spread over a pool give the bits of one thread, and each output
// element is its positions' weighted values summed in increasing position
// order in double (the documented order), checked against that sum written
// out here over a long prompt in two chunks.
TEST(GqaAttentionTest, ThreadsAndChunksKeepTheSummationOrder) {
  constexpr int kHeads = 6, kKvHeads = 2, kN = 300;
  GqaSpec spec{kHeads, kKvHeads, kD, 10000, 0};
  spec.inv_freq.assign(kD / 2, 0.0f);  // identity RoPE: q, k kept as given
  GqaAttention a(spec);
  std::vector<float> q(kN * kHeads * kD), k(kN * kKvHeads * kD),
      v(kN * kKvHeads * kD);
  for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.37f * i);
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = std::cos(0.11f * i);
    v[i] = std::sin(0.05f * i + 1) * 3;
  }
  kernels::ThreadPool pool(3);
  std::vector<float> alone(q.size()), pooled(q.size());
  for (kernels::ThreadPool* p :
       {static_cast<kernels::ThreadPool*>(nullptr), &pool}) {
    std::vector<float> qq = q, kk = k, ck, cv;
    float* out = p == nullptr ? alone.data() : pooled.data();
    const size_t split = 170;  // two chunks: the second attends to the first
    a.Attend(qq.data(), kk.data(), v.data(), split, 0, &ck, &cv, out, {},
             nullptr, 0, p);
    a.Attend(qq.data() + split * kHeads * kD, kk.data() + split * kKvHeads * kD,
             v.data() + split * kKvHeads * kD, kN - split, split, &ck, &cv,
             out + split * kHeads * kD, {}, nullptr, 0, p);
  }
  EXPECT_EQ(alone, pooled);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kD));
  for (int t : {0, 1, 169, 170, kN - 1}) {
    for (int h = 0; h < kHeads; ++h) {
      const int kvh = h / (kHeads / kKvHeads);
      // Each score in the Dot32 float order (kernels.h) written out, each
      // column's sum one fma per position in order.
      std::vector<float> scores(t + 1);
      for (int j = 0; j <= t; ++j) {
        const float* qr = q.data() + (t * kHeads + h) * kD;
        const float* kr = k.data() + (j * kKvHeads + kvh) * kD;
        float lane[32] = {};
        for (int c = 0; c < kD; ++c) {
          lane[c % 32] = std::fma(qr[c], kr[c], lane[c % 32]);
        }
        for (int width = 16; width >= 2; width /= 2) {
          for (int l = 0; l < width; ++l) lane[l] += lane[l + width];
        }
        scores[j] = (lane[0] + lane[1]) * scale;
      }
      kernels::Softmax(scores.data(), scores.size());
      for (int i = 0; i < kD; ++i) {
        float acc = 0;
        for (int j = 0; j <= t; ++j) {
          acc = std::fma(scores[j], v[(j * kKvHeads + kvh) * kD + i], acc);
        }
        EXPECT_EQ(alone[(t * kHeads + h) * kD + i], acc)
            << t << " " << h << " " << i;
      }
    }
  }
}

}  // namespace
}  // namespace flotilla::coordinator
