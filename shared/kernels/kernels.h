// Numeric kernels: pure functions over spans and shapes. No I/O, no Status,
// no metrics. Every kernel has a scalar reference and a SIMD path chosen at
// run time (AVX-512 / AVX2 / Highway / scalar); all produce bitwise identical
// results, for any thread count, because every output element is computed by
// exactly one thread with a fixed reduction order (documented per kernel
// below).
//
// Precision policy: activations are float32. The weight matvecs and DotF32
// accumulate in double (the Dot16 order below, as the reference C engine
// does); attention's scores and weighted sums accumulate in float in fixed
// orders (DotF32Rows, AddWeightedRows); norms compute their sum of squares
// and 1/sqrt in double and round to float once.
#ifndef FLOTILLA_SHARED_KERNELS_KERNELS_H_
#define FLOTILLA_SHARED_KERNELS_KERNELS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "shared/kernels/thread_pool.h"

namespace flotilla::kernels {

// Which implementation the dispatcher uses. kAuto picks the best the CPU has:
// on x86-64 the hand-written AVX-512 or AVX2 kernels, elsewhere (ARM NEON
// and SVE) the portable Highway kernels, which x86 can also select.
enum class SimdLevel { kAuto, kScalar, kAvx2, kAvx512, kHighway };

// Forces a level (for tests and benchmarks); returns the level now in use.
// Requesting a level the CPU lacks falls back to the best available one.
SimdLevel SetSimdLevel(SimdLevel level);
SimdLevel ActiveSimdLevel();
const char* SimdLevelName(SimdLevel level);
// The level named by SimdLevelName ("auto", "scalar", "avx2", "avx512",
// "highway"); false for any other name.
bool SimdLevelFromName(const char* name, SimdLevel* level);
// Sets the named level for the binaries' --simd flag. Empty when it is in
// use; otherwise why not (an unknown name, or a level this CPU lacks),
// naming the levels it has.
std::string UseSimdLevelNamed(const char* name);

enum class DenseType { kF32, kBF16 };

// A dense row-major weight matrix W[rows][cols], applied as y = W x.
struct DenseMatrix {
  DenseType type = DenseType::kF32;
  const void* data = nullptr;  // float* or uint16_t* (bf16 bits)
  size_t rows = 0;
  size_t cols = 0;
};

// An MXFP4 matrix with logical shape [rows][cols] (cols % 32 == 0).
// packed: [rows][cols/2], low nibble = even column. scales: [rows][cols/32],
// E8M0 exponent s, multiplier 2^(s-127), s == 255 treated as 0.
struct Mxfp4Matrix {
  const uint8_t* packed = nullptr;
  const uint8_t* scales = nullptr;
  size_t rows = 0;
  size_t cols = 0;
};

// bf16 bits -> float (exact).
inline float Bf16ToF32(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
}

// Y[t][r] = sum_c W[r][c] * X[t][c] for t in [0, n_tokens).
// X is [n_tokens][cols], Y is [n_tokens][rows]. Each dot product is the
// double-accumulated "Dot16" order: 16 double lanes, all starting at +0.0;
// lane i adds (double)W[r][c] * (double)X[t][c] for the columns c with
// c % 16 == i, in increasing c; then the tree lane[i] += lane[i+8] (i < 8),
// lane[i] += lane[i+4] (i < 4), lane[i] += lane[i+2] (i < 2),
// lane[0] + lane[1]; the double is rounded to float once. A product of two
// floats is exact in double, so fused and separate multiply-add agree.
// bf16 weights are widened exactly, so a bf16 matrix and the same values as
// f32 give identical bits. Parallel over rows (each element is computed by
// one thread); for n_tokens > 1 the tokens loop inside a row block, so each
// weight row is read from memory once per call.
void MatMul(const DenseMatrix& w, const float* x, size_t n_tokens, float* y,
            ThreadPool* pool);

// Same contract for MXFP4 weights, computed on the packed bytes (an expert is
// never dequantised as a whole). Per 32-column group the products are summed
// in double in a fixed order, scaled by 2^(s-127) (exact), and groups are
// summed in double in increasing order; rounded to float once.
// Exact order, with p(c) = (double)E2M1(c) * (double)X[t][c] (exact) for the
// group's columns c = 0..31: lane i (0..7) = (p(2i) + p(2i+16)) +
// (p(2i+1) + p(2i+17)); then lane[i] += lane[i+4] (i < 4),
// lane[i] += lane[i+2] (i < 2), group = lane[0] + lane[1];
// total (from +0.0) += group * 2^(s-127) for g = 0, 1, ... A group with
// s == 255 is skipped (contributes nothing, even against inf/NaN inputs);
// s == 0 is 2^-127. Lanes follow the nibble order of the packed bytes so
// SIMD code needs no shuffles. Requires cols % 32 == 0.
void MatMulMxfp4(const Mxfp4Matrix& w, const float* x, size_t n_tokens,
                 float* y, ThreadPool* pool);

// Dequantises one row of an MXFP4 matrix (tests and tools only): out[c] =
// E2M1[nibble] * 2^(s-127) exactly (subnormal floats kept; s == 255 -> 0).
void DequantizeMxfp4Row(const Mxfp4Matrix& w, size_t row, float* out);

// Dot16-order dot product of two float vectors, as a double.
double DotF32(const float* a, const float* b, size_t n);

// Attention's float orders (issue 47: float accumulation where it pays).
// out[j] = the dot product of a and rows + j * stride over n columns in the
// "Dot32" float order: 32 float lanes, all starting at +0.0f; lane i takes
// the columns c with c % 32 == i, in increasing c, each as one fused
// multiply-add, lane = fma(a[c], row[c], lane), rounded once; then the tree
// lane[i] += lane[i+16] (i < 16), += lane[i+8] (i < 8), += lane[i+4]
// (i < 4), += lane[i+2] (i < 2), and lane[0] + lane[1]. A lane with no
// column left receives nothing (SIMD tails are masked, not zero-padded).
// Why 32 lanes: two AVX-512, four AVX2 or eight NEON registers per row, and
// a head of 128 columns leaves 4 products per lane: one query against
// `count` cached keys.
void DotF32Rows(const float* a, const float* rows, size_t stride, size_t count,
                size_t n, float* out);

// acc[i] = fma(w[j], rows[j * stride + i], acc[i]) for i < n, adding
// j = 0, 1, ..., count - 1 in that order (one running float per column,
// one rounding per step): attention's weighted sum of cached values.
void AddWeightedRows(const float* w, const float* rows, size_t stride,
                     size_t count, size_t n, float* acc);

// out[i * out_stride + j] = DotF32Rows(a + i * a_stride, ...)'s out[j] for
// i < a_count, j < row_count, the same bits: a block of attention queries
// against a block of cached keys, tiled so that every load serves several
// pairs.
void DotF32RowsMany(const float* a, size_t a_stride, size_t a_count,
                    const float* rows, size_t row_stride, size_t row_count,
                    size_t n, float* out, size_t out_stride);

// AddWeightedRows(w + i * w_stride, rows, row_stride, row_count, n,
// acc + i * acc_stride) for each i < w_count, the same bits: a block of
// queries' weighted sums over the same block of cached values.
void AddWeightedRowsMany(const float* w, size_t w_stride, size_t w_count,
                         const float* rows, size_t row_stride, size_t row_count,
                         size_t n, float* acc, size_t acc_stride);

// y = w * x / sqrt(mean(x^2) + eps). Sum of squares in double (Dot16 order),
// inv = (float)(1.0 / sqrt(sum / n + eps)) in double, then
// y[i] = w[i] * (x[i] * inv) in float.
// w may be null (no weight). x and y may alias.
void RmsNorm(const float* x, const float* w, size_t n, float eps, float* y);

// SiTU-GLU: y = [b1 tanh(g/b1) sigmoid(g)] * [b2 tanh(u/b2)], in float; an
// infinite beta means no clamp on that side (both infinite: SwiGLU,
// y = (g * sigmoid(g)) * u),
// evaluated as ((b1 * tanh(g / b1)) * Sigmoid(g)) * (b2 * tanh(u / b2)).
void SituGlu(const float* g, const float* u, size_t n, float beta1, float beta2,
             float* y);

// gpt-oss's clamped SwiGLU, in float as upstream writes it:
// g' = min(g, limit), u' = clamp(u, -limit, limit),
// y = (u' + 1) * (g' * Sigmoid(alpha * g')). The gate is clamped from above
// only.
void ClampedSwiglu(const float* g, const float* u, size_t n, float limit,
                   float alpha, float* y);

// In-place softmax: subtract max, exp in float, sum in double
// (sequentially), x[i] = (float)((double)e[i] / sum).
void Softmax(float* x, size_t n);

// sigmoid and SiLU helpers used elementwise by the model, in float:
// Sigmoid(x) = 1 / (1 + exp(-x)); SiLU(x) = x * Sigmoid(x).
float Sigmoid(float x);
void SiluInPlace(float* x, size_t n);

}  // namespace flotilla::kernels

#endif  // FLOTILLA_SHARED_KERNELS_KERNELS_H_
