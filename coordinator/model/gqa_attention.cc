#include "coordinator/model/gqa_attention.h"

#include <algorithm>
#include <cmath>

#include "shared/base/check.h"
#include "shared/kernels/kernels.h"
#include "shared/kernels/thread_pool.h"

namespace flotilla::coordinator {
namespace {

// HF's rotate-half RoPE on one head: pairs (i, i + d/2).
void Rotate(float* x, const float* cos, const float* sin, size_t half) {
  for (size_t i = 0; i < half; ++i) {
    const float a = x[i], b = x[i + half];
    x[i] = a * cos[i] - b * sin[i];
    x[i + half] = b * cos[i] + a * sin[i];
  }
}

}  // namespace

GqaAttention::GqaAttention(const GqaSpec& spec) : spec_(spec) {
  const size_t d = spec.head_dim;
  if (!spec.inv_freq.empty()) {
    inv_freq_ = spec.inv_freq;
    return;
  }
  // inv_freq[i] = theta^(-2i/d), as HF computes it (then rounded to float).
  inv_freq_.resize(d / 2);
  for (size_t i = 0; i < d / 2; ++i) {
    inv_freq_[i] = static_cast<float>(
        1.0 / std::pow(spec.rope_theta, static_cast<double>(2 * i) / d));
  }
}

void GqaAttention::Attend(float* q, float* k, const float* v, size_t n,
                          size_t first_position, std::vector<float>* keys,
                          std::vector<float>* values, float* attn,
                          const QkNorm& norm, const float* sinks,
                          size_t cache_first, kernels::ThreadPool* pool) const {
  const size_t d = spec_.head_dim, half = d / 2;
  const size_t heads = spec_.heads, kv_heads = spec_.kv_heads;
  const size_t group = heads / kv_heads;
  if (norm.q != nullptr) {
    for (size_t h = 0; h < n * heads; ++h) {
      kernels::RmsNorm(q + h * d, norm.q, d, norm.eps, q + h * d);
    }
  }
  if (norm.k != nullptr) {
    for (size_t h = 0; h < n * kv_heads; ++h) {
      kernels::RmsNorm(k + h * d, norm.k, d, norm.eps, k + h * d);
    }
  }
  std::vector<float> cos(half), sin(half);
  for (size_t t = 0; t < n; ++t) {
    const double pos = static_cast<double>(first_position + t);
    for (size_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(pos) * inv_freq_[i];
      cos[i] = std::cos(angle) * spec_.rope_factor;
      sin[i] = std::sin(angle) * spec_.rope_factor;
    }
    for (size_t h = 0; h < heads; ++h) {
      Rotate(q + (t * heads + h) * d, cos.data(), sin.data(), half);
    }
    for (size_t h = 0; h < kv_heads; ++h) {
      Rotate(k + (t * kv_heads + h) * d, cos.data(), sin.data(), half);
    }
  }
  const size_t kv_width = kv_heads * d;
  keys->insert(keys->end(), k, k + n * kv_width);
  values->insert(values->end(), v, v + n * kv_width);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const size_t window = spec_.sliding_window > 0 ? spec_.sliding_window : 0;
  // Heads are independent: each worker writes only its heads' slices of
  // `attn`. Within a head, queries go in blocks of kQueries against the
  // cache in blocks of kRows rows, so a block of keys (or values) is read
  // from memory once for all the block's queries, not once per query; the
  // queries that see a whole row block (all but the causal diagonal's and a
  // window's edge) take it together (DotF32RowsMany, AddWeightedRowsMany:
  // tiles that reuse every load). Every output element still sums
  // its positions in increasing order (the blocks are visited in order, and
  // in each the rows in order), whatever the blocking and the thread count:
  // the bits of one query at a time.
  constexpr size_t kQueries = 32, kRows = 256;
  kernels::ParallelFor(pool, heads, 1, [&](size_t h_begin, size_t h_end) {
    std::vector<std::vector<float>> dots(kQueries);
    std::vector<std::vector<float>> scores(kQueries);
    std::vector<float> acc(kQueries * d), block_dots(kQueries * kRows);
    std::vector<float> block_weights(kQueries * kRows);
    for (size_t h = h_begin; h < h_end; ++h) {
      const size_t kvh = h / group;
      for (size_t t0 = 0; t0 < n; t0 += kQueries) {
        const size_t count = std::min(kQueries, n - t0);
        // Query t0 + i attends to cache positions [first[i], its own].
        size_t first[kQueries] = {};
        for (size_t i = 0; i < count; ++i) {
          const size_t pos = first_position + t0 + i;
          first[i] = window > 0 && pos + 1 > window ? pos + 1 - window : 0;
          // TrimToWindow keeps every row a later token can see.
          FLOTILLA_CHECK(first[i] >= cache_first);
        }
        const size_t lo = first[0];                     // firsts grow with t
        const size_t hi = first_position + t0 + count;  // past the last pos
        // For each row block [b, end): whole(i0, i1, b, end) for each run of
        // queries that see all of it, part(i, from, to) for each other
        // query's share of it.
        auto blocks = [&](const auto& whole, const auto& part) {
          for (size_t b = lo; b < hi; b += kRows) {
            const size_t end = std::min(b + kRows, hi);
            size_t run = count;  // start of the current run of whole ones
            for (size_t i = 0; i <= count; ++i) {
              size_t from = 0, to = 0;
              if (i < count) {
                from = std::max(b, first[i]);
                to = std::min(end, first_position + t0 + i + 1);
              }
              const bool sees_all = i < count && from == b && to == end;
              if (sees_all && run == count) run = i;
              if (!sees_all && run != count) {
                whole(run, i, b, end);
                run = count;
              }
              if (i < count && !sees_all && from < to) part(i, from, to);
            }
          }
        };
        const size_t q_stride = heads * d;
        auto key_rows = [&](size_t from) {
          return keys->data() + (from - cache_first) * kv_width + kvh * d;
        };
        auto value_rows = [&](size_t from) {
          return values->data() + (from - cache_first) * kv_width + kvh * d;
        };
        for (size_t i = 0; i < count; ++i) {
          dots[i].resize(first_position + t0 + i + 1 - first[i]);
        }
        blocks(
            [&](size_t i0, size_t i1, size_t b, size_t end) {
              kernels::DotF32RowsMany(q + ((t0 + i0) * heads + h) * d, q_stride,
                                      i1 - i0, key_rows(b), kv_width, end - b,
                                      d, block_dots.data(), kRows);
              for (size_t i = i0; i < i1; ++i) {
                std::copy_n(block_dots.data() + (i - i0) * kRows, end - b,
                            dots[i].data() + (b - first[i]));
              }
            },
            [&](size_t i, size_t from, size_t to) {
              kernels::DotF32Rows(q + ((t0 + i) * heads + h) * d,
                                  key_rows(from), kv_width, to - from, d,
                                  dots[i].data() + (from - first[i]));
            });
        for (size_t i = 0; i < count; ++i) {
          const size_t len = dots[i].size();
          scores[i].resize(len + (sinks != nullptr ? 1 : 0));
          for (size_t j = 0; j < len; ++j) {
            scores[i][j] = dots[i][j] * scale;
          }
          if (sinks != nullptr) scores[i][len] = sinks[h];  // dropped after
          kernels::Softmax(scores[i].data(), scores[i].size());
        }
        std::fill(acc.begin(), acc.begin() + count * d, 0.0f);
        blocks(
            [&](size_t i0, size_t i1, size_t b, size_t end) {
              for (size_t i = i0; i < i1; ++i) {
                std::copy_n(scores[i].data() + (b - first[i]), end - b,
                            block_weights.data() + (i - i0) * kRows);
              }
              kernels::AddWeightedRowsMany(block_weights.data(), kRows, i1 - i0,
                                           value_rows(b), kv_width, end - b, d,
                                           acc.data() + i0 * d, d);
            },
            [&](size_t i, size_t from, size_t to) {
              kernels::AddWeightedRows(scores[i].data() + (from - first[i]),
                                       value_rows(from), kv_width, to - from, d,
                                       acc.data() + i * d);
            });
        for (size_t i = 0; i < count; ++i) {
          float* dst = attn + ((t0 + i) * heads + h) * d;
          std::copy_n(acc.data() + i * d, d, dst);
        }
      }
    }
  });
}

void GqaAttention::TrimToWindow(size_t next_position, std::vector<float>* keys,
                                std::vector<float>* values,
                                size_t* cache_first) const {
  const size_t window = spec_.sliding_window;
  if (window == 0 || next_position < window) return;
  const size_t keep_from = next_position - (window - 1);
  if (keep_from <= *cache_first) return;
  const size_t row = static_cast<size_t>(spec_.kv_heads) * spec_.head_dim;
  const size_t drop = (keep_from - *cache_first) * row;
  keys->erase(keys->begin(), keys->begin() + drop);
  values->erase(values->begin(), values->begin() + drop);
  *cache_first = keep_from;
}

}  // namespace flotilla::coordinator
