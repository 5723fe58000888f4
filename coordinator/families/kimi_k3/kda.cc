#include "coordinator/families/kimi_k3/kda.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "shared/kernels/kernels.h"
#include "shared/kernels/recurrent.h"

namespace flotilla::coordinator {

void InitKdaState(const model::K3Config& c, KdaState* state) {
  const size_t h = c.kda_num_heads, d = c.kda_head_dim, p = h * d,
               taps = c.short_conv_kernel_size - 1;
  state->s.assign(h * d * d, 0.0f);
  state->conv_q.assign(p * taps, 0.0f);
  state->conv_k.assign(p * taps, 0.0f);
  state->conv_v.assign(p * taps, 0.0f);
}

void ShortConvSilu(const float* weight, int kernel, int channels,
                   const float* in, int steps, float* state, float* out) {
  const int taps = kernel - 1;
  for (int c = 0; c < channels; ++c) {
    const float* w = weight + static_cast<size_t>(c) * kernel;
    float* hist = state + static_cast<size_t>(c) * taps;
    for (int t = 0; t < steps; ++t) {
      const float cur = in[static_cast<size_t>(t) * channels + c];
      double acc = 0.0;
      for (int j = 0; j < taps; ++j) acc += double{w[j]} * hist[j];
      acc += double{w[taps]} * cur;
      // Shift the window: drop the oldest input, append the current one.
      for (int j = 0; j + 1 < taps; ++j) hist[j] = hist[j + 1];
      if (taps > 0) hist[taps - 1] = cur;
      const float y = static_cast<float>(acc);
      out[static_cast<size_t>(t) * channels + c] = y * kernels::Sigmoid(y);
    }
  }
}

void KdaDecay(const float* z, const float* a_log, const float* dt_bias,
              float lower_bound, int heads, int head_dim, float* g,
              float* alpha) {
  for (int h = 0; h < heads; ++h) {
    const float a = std::exp(a_log[h]);
    for (int d = 0; d < head_dim; ++d) {
      const int i = h * head_dim + d;
      const float gi = lower_bound * kernels::Sigmoid(a * (z[i] + dt_bias[i]));
      g[i] = gi;
      alpha[i] = std::exp(gi);
    }
  }
}

void L2NormalizeHeads(float* x, int heads, int head_dim) {
  for (int h = 0; h < heads; ++h) {
    float* v = x + static_cast<size_t>(h) * head_dim;
    const double ss = kernels::DotF32(v, v, head_dim);
    const float inv = static_cast<float>(1.0 / std::sqrt(ss + 1e-6));
    for (int d = 0; d < head_dim; ++d) v[d] *= inv;
  }
}

namespace {

std::vector<float> Rows(const std::vector<float>& all, size_t first,
                        size_t count, size_t width) {
  return std::vector<float>(all.begin() + first * width,
                            all.begin() + (first + count) * width);
}

}  // namespace

void KdaForwardRows(const KdaWeights& w, const model::K3Config& c,
                    const float* x, const std::vector<size_t>& offsets,
                    const std::vector<KdaState*>& states, float* out,
                    kernels::ThreadPool* pool) {
  const size_t n = offsets.back();
  const int h = c.kda_num_heads, d = c.kda_head_dim, p = h * d,
            k = c.short_conv_kernel_size;
  // The projections of every row at once (a batch matmul reads each weight
  // once for all rows); each row's result is the same whatever the batch.
  std::vector<float> pre_q(n * p), pre_k(n * p), pre_v(n * p), q(n * p),
      kk(n * p), v(n * p), g(n * p), fa(n * d), z(n * p), beta(n * h), y(n * p);
  kernels::MatMul(w.q_proj.view(), x, n, pre_q.data(), pool);
  kernels::MatMul(w.k_proj.view(), x, n, pre_k.data(), pool);
  kernels::MatMul(w.v_proj.view(), x, n, pre_v.data(), pool);
  kernels::MatMul(w.g_proj.view(), x, n, g.data(), pool);
  kernels::MatMul(w.f_a.view(), x, n, fa.data(), pool);
  kernels::MatMul(w.f_b.view(), fa.data(), n, z.data(), pool);
  kernels::MatMul(w.b_proj.view(), x, n, beta.data(), pool);

  const float q_scale = static_cast<float>(1.0 / std::sqrt(double(d)));
  std::vector<float> decay(p), alpha(p), o(p);
  // Each sequence's rows through its own conv windows and recurrent state.
  for (size_t seq = 0; seq < states.size(); ++seq) {
    KdaState* state = states[seq];
    const size_t first = offsets[seq], steps = offsets[seq + 1] - first;
    const size_t at = first * p;
    KdaState::Undo* undo = state->keep_undo ? &state->undo : nullptr;
    if (undo != nullptr) {
      undo->s = state->s;
      undo->conv_q = state->conv_q;
      undo->conv_k = state->conv_k;
      undo->conv_v = state->conv_v;
      undo->steps = static_cast<int>(steps);
      undo->pre_q = Rows(pre_q, first, steps, p);
      undo->pre_k = Rows(pre_k, first, steps, p);
      undo->pre_v = Rows(pre_v, first, steps, p);
      undo->alpha.clear();
    }
    const int st = static_cast<int>(steps);
    ShortConvSilu(w.q_conv.data(), k, p, pre_q.data() + at, st,
                  state->conv_q.data(), q.data() + at);
    ShortConvSilu(w.k_conv.data(), k, p, pre_k.data() + at, st,
                  state->conv_k.data(), kk.data() + at);
    ShortConvSilu(w.v_conv.data(), k, p, pre_v.data() + at, st,
                  state->conv_v.data(), v.data() + at);
    for (size_t t = first; t < first + steps; ++t) {
      float* qt = q.data() + t * p;
      float* kt = kk.data() + t * p;
      L2NormalizeHeads(qt, h, d);
      L2NormalizeHeads(kt, h, d);
      for (int i = 0; i < p; ++i) qt[i] *= q_scale;
      float* bt = beta.data() + t * h;
      for (int i = 0; i < h; ++i) bt[i] = kernels::Sigmoid(bt[i]);
      KdaDecay(z.data() + t * p, w.a_log.data(), w.dt_bias.data(),
               c.gate_lower_bound, h, d, decay.data(), alpha.data());
      if (undo != nullptr) {
        undo->alpha.insert(undo->alpha.end(), alpha.begin(), alpha.end());
      }
      kernels::KdaRecurrentStep(state->s.data(), qt, kt, v.data() + t * p,
                                alpha.data(), bt, h, d, o.data());
      // Head-wise RMSNorm with the shared o_norm weight, then the gate.
      float* yt = y.data() + t * p;
      for (int hh = 0; hh < h; ++hh) {
        kernels::RmsNorm(o.data() + hh * d, w.o_norm.data(), d, c.rms_norm_eps,
                         yt + hh * d);
      }
      const float* gt = g.data() + t * p;
      for (int i = 0; i < p; ++i) yt[i] *= kernels::Sigmoid(gt[i]);
    }
    if (undo != nullptr) {
      // The recurrence inputs as KdaRecurrentStep read them.
      undo->q = Rows(q, first, steps, p);
      undo->k = Rows(kk, first, steps, p);
      undo->v = Rows(v, first, steps, p);
      undo->beta = Rows(beta, first, steps, h);
    }
  }
  kernels::MatMul(w.o_proj.view(), y.data(), n, out, pool);
}

void KdaForward(const KdaWeights& w, const model::K3Config& c, const float* x,
                int steps, KdaState* state, float* out,
                kernels::ThreadPool* pool) {
  const size_t n = static_cast<size_t>(steps);
  KdaForwardRows(w, c, x, {0, n}, {state}, out, pool);
}

void KdaUndo(const model::K3Config& c, int keep, KdaState* state) {
  const int h = c.kda_num_heads, d = c.kda_head_dim, p = h * d;
  const int taps = c.short_conv_kernel_size - 1;
  KdaState::Undo& u = state->undo;
  state->s = u.s;
  state->conv_q = u.conv_q;
  state->conv_k = u.conv_k;
  state->conv_v = u.conv_v;
  // The conv windows: shift in each kept token's pre-conv input, as
  // ShortConvSilu does.
  const std::pair<std::vector<float>*, const std::vector<float>*> convs[3] = {
      {&state->conv_q, &u.pre_q},
      {&state->conv_k, &u.pre_k},
      {&state->conv_v, &u.pre_v}};
  for (const auto& [hist_all, pre] : convs) {
    for (int ch = 0; ch < p; ++ch) {
      float* hist = hist_all->data() + static_cast<size_t>(ch) * taps;
      for (int t = 0; t < keep; ++t) {
        for (int j = 0; j + 1 < taps; ++j) hist[j] = hist[j + 1];
        if (taps > 0) hist[taps - 1] = (*pre)[static_cast<size_t>(t) * p + ch];
      }
    }
  }
  std::vector<float> o(p);
  for (int t = 0; t < keep; ++t) {
    const size_t at = static_cast<size_t>(t) * p;
    kernels::KdaRecurrentStep(state->s.data(), u.q.data() + at, u.k.data() + at,
                              u.v.data() + at, u.alpha.data() + at,
                              u.beta.data() + static_cast<size_t>(t) * h, h, d,
                              o.data());
  }
}

}  // namespace flotilla::coordinator
