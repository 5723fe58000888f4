// Portable SIMD kernels on Google's Highway, compiled once per target
// (NEON and SVE on ARM; SSE4, AVX2 and AVX-512 on x86) and picked at run
// time by Highway's dispatcher. Bit-identical to kernels_scalar.cc: the 16
// Dot16 lanes are eight two-double vectors (lanes 2k and 2k+1 in vector k),
// folded k += k+4, +2, +1 and then the vector's two lanes; the MXFP4 group
// is summed in the scalar order. A 128-bit vector is the widest every
// target has, so the same code is the NEON path and a measured alternative
// to the hand-written x86 files (bench/measurements.md: those stay, being
// faster on x86). Products of widened floats are exact in double, so
// MulAdd (fused or not, by target) gives the scalar bits.
//
// Vectors are named variables, never arrays: SVE vectors are sizeless.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "shared/kernels/kernels_hwy.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// clang-format off: foreach_target.h must come first.
#include "hwy/highway.h"
// clang-format on

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "shared/kernels/kernels_internal.h"

HWY_BEFORE_NAMESPACE();
namespace flotilla::kernels::internal {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_SCALAR
// One lane per vector: the baseline target of a build without SIMD flags,
// which the dispatcher runs only on a CPU with no SIMD target. It is the
// scalar reference.
double DotHwy(const float* a, const float* b, size_t n) {
  return ScalarTable().dot_f32(a, b, n);
}
void DenseRowsHwy(const DenseMatrix& w, const float* x, const double* xd,
                  size_t n_tokens, size_t row_begin, size_t row_end, float* y) {
  ScalarTable().dense_rows(w, x, xd, n_tokens, row_begin, row_end, y);
}
void Mxfp4RowsHwy(const Mxfp4Matrix& w, const float* x, const double* xd,
                  size_t n_tokens, size_t row_begin, size_t row_end, float* y) {
  ScalarTable().mxfp4_rows(w, x, xd, n_tokens, row_begin, row_end, y);
}
#else
namespace hn = hwy::HWY_NAMESPACE;

using D2 = hn::FixedTag<double, 2>;
using F2 = hn::FixedTag<float, 2>;
using F4 = hn::FixedTag<float, 4>;
using U16x4 = hn::FixedTag<uint16_t, 4>;
using U32x4 = hn::FixedTag<uint32_t, 4>;
using V2 = hn::Vec<D2>;

// Eight vectors of lanes folded k += k+4, +2, +1: the first stages of both
// trees (Dot16's i += i+8, +4, +2 on two-double vectors; Dot32's i += i+16,
// +8, +4 on four-float ones).
template <class V>
HWY_INLINE V FoldEight(V a0, V a1, V a2, V a3, V a4, V a5, V a6, V a7) {
  a0 = hn::Add(a0, a4);
  a1 = hn::Add(a1, a5);
  a2 = hn::Add(a2, a6);
  a3 = hn::Add(a3, a7);
  a0 = hn::Add(a0, a2);
  a1 = hn::Add(a1, a3);
  return hn::Add(a0, a1);
}

// Four weights at p widened to float: exact (bf16 -> f32 is a 16-bit shift).
HWY_INLINE hn::Vec<F4> Load4(const float* p) { return hn::LoadU(F4(), p); }
HWY_INLINE hn::Vec<F4> Load4(const uint16_t* p) {
  const auto wide = hn::PromoteTo(U32x4(), hn::LoadU(U16x4(), p));
  return hn::BitCast(F4(), hn::ShiftLeft<16>(wide));
}

HWY_INLINE V2 Lo(hn::Vec<F4> v) {
  return hn::PromoteTo(D2(), hn::LowerHalf(F2(), v));
}
HWY_INLINE V2 Hi(hn::Vec<F4> v) {
  return hn::PromoteTo(D2(), hn::UpperHalf(F2(), v));
}

// Adds columns c..c+15 (w and x both at column c) into the 16 Dot16 lanes
// (a0..a7, two each).
template <typename W>
HWY_INLINE void Step16(const W* w, const float* x, V2& a0, V2& a1, V2& a2,
                       V2& a3, V2& a4, V2& a5, V2& a6, V2& a7) {
  auto w0 = Load4(w), w1 = Load4(w + 4), w2 = Load4(w + 8), w3 = Load4(w + 12);
  auto x0 = Load4(x), x1 = Load4(x + 4), x2 = Load4(x + 8), x3 = Load4(x + 12);
  a0 = hn::MulAdd(Lo(w0), Lo(x0), a0);
  a1 = hn::MulAdd(Hi(w0), Hi(x0), a1);
  a2 = hn::MulAdd(Lo(w1), Lo(x1), a2);
  a3 = hn::MulAdd(Hi(w1), Hi(x1), a3);
  a4 = hn::MulAdd(Lo(w2), Lo(x2), a4);
  a5 = hn::MulAdd(Hi(w2), Hi(x2), a5);
  a6 = hn::MulAdd(Lo(w3), Lo(x3), a6);
  a7 = hn::MulAdd(Hi(w3), Hi(x3), a7);
}

// One Dot16 dot product of n columns.
template <typename W>
HWY_INLINE double Dot16(const W* w, const float* x, size_t n) {
  const D2 d;
  V2 a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
     a7 = a0;
  const size_t full = n & ~size_t{15};
  for (size_t c = 0; c < full; c += 16) {
    Step16(w + c, x + c, a0, a1, a2, a3, a4, a5, a6, a7);
  }
  if (full < n) {
    // Zero-padded copies of the tail: a +0.0 product added to a lane that
    // started at +0.0 leaves it as the scalar order does.
    W w_tail[16] = {};
    float x_tail[16] = {};
    for (size_t c = full; c < n; ++c) {
      w_tail[c - full] = w[c];
      x_tail[c - full] = x[c];
    }
    Step16(w_tail, x_tail, a0, a1, a2, a3, a4, a5, a6, a7);
  }
  // Lanes i += i+8 (vector k += k+4), +4, +2, then the last pair.
  a0 = FoldEight(a0, a1, a2, a3, a4, a5, a6, a7);
  return hn::GetLane(a0) + hn::ExtractLane(a0, 1);
}

double DotHwy(const float* a, const float* b, size_t n) {
  return Dot16(a, b, n);
}

#if HWY_NATIVE_FMA
using F4V = hn::Vec<F4>;

// Columns c..c+31 of a and row into the 32 Dot32 lanes (acc[k] = lanes
// 4k..4k+3), or only the first `live` of them (the others keep their value).
HWY_INLINE void Step32(const float* a, const float* row, size_t live, F4V& a0,
                       F4V& a1, F4V& a2, F4V& a3, F4V& a4, F4V& a5, F4V& a6,
                       F4V& a7) {
  const F4 d;
#define FLOTILLA_HWY_STEP(k, acc)                                        \
  if (live >= 4 * (k) + 4) {                                             \
    acc = hn::MulAdd(Load4(a + 4 * (k)), Load4(row + 4 * (k)), acc);     \
  } else if (live > 4 * (k)) {                                           \
    acc = hn::IfThenElse(                                                \
        hn::FirstN(d, live - 4 * (k)),                                   \
        hn::MulAdd(Load4(a + 4 * (k)), Load4(row + 4 * (k)), acc), acc); \
  }
  FLOTILLA_HWY_STEP(0, a0)
  FLOTILLA_HWY_STEP(1, a1)
  FLOTILLA_HWY_STEP(2, a2)
  FLOTILLA_HWY_STEP(3, a3)
  FLOTILLA_HWY_STEP(4, a4)
  FLOTILLA_HWY_STEP(5, a5)
  FLOTILLA_HWY_STEP(6, a6)
  FLOTILLA_HWY_STEP(7, a7)
#undef FLOTILLA_HWY_STEP
}

// One Dot32 dot product of n columns (kernels.h): vector k += k+4 (lanes
// i += i+16), +2 (+8), +1 (+4), then within the vector +2 and +1; the tail
// from zero-padded copies with its lanes past the columns left alone.
HWY_INLINE float Dot32(const float* a, const float* row, size_t n) {
  const F4 d;
  F4V a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
      a7 = a0;
  const size_t full = n & ~size_t{31};
  for (size_t c = 0; c < full; c += 32) {
    Step32(a + c, row + c, 32, a0, a1, a2, a3, a4, a5, a6, a7);
  }
  if (full < n) {
    float a_tail[32] = {}, r_tail[32] = {};
    for (size_t c = full; c < n; ++c) {
      a_tail[c - full] = a[c];
      r_tail[c - full] = row[c];
    }
    Step32(a_tail, r_tail, n - full, a0, a1, a2, a3, a4, a5, a6, a7);
  }
  a0 = FoldEight(a0, a1, a2, a3, a4, a5, a6, a7);
  const float l0 = hn::ExtractLane(a0, 0) + hn::ExtractLane(a0, 2);
  const float l1 = hn::ExtractLane(a0, 1) + hn::ExtractLane(a0, 3);
  return l0 + l1;
}

void DotRowsHwy(const float* a, const float* rows, size_t stride, size_t count,
                size_t n, float* out) {
  for (size_t j = 0; j < count; ++j) out[j] = Dot32(a, rows + j * stride, n);
}

// Four columns per vector, each its own running float sum over the rows in
// order (one fused MulAdd per row); the last n % 4 columns one std::fma each.
void AddWeightedRowsHwy(const float* w, const float* rows, size_t stride,
                        size_t count, size_t n, float* acc) {
  const F4 d;
  size_t c = 0;
  for (; c + 4 <= n; c += 4) {
    F4V sum = hn::LoadU(d, acc + c);
    for (size_t j = 0; j < count; ++j) {
      sum = hn::MulAdd(hn::Set(d, w[j]), hn::LoadU(d, rows + j * stride + c),
                       sum);
    }
    hn::StoreU(sum, d, acc + c);
  }
  for (; c < n; ++c) {
    float sum = acc[c];
    for (size_t j = 0; j < count; ++j) {
      sum = std::fma(w[j], rows[j * stride + c], sum);
    }
    acc[c] = sum;
  }
}
#endif  // HWY_NATIVE_FMA

template <typename W>
void DenseRowsT(const W* data, size_t rows, size_t cols, const float* x,
                size_t n_tokens, size_t row_begin, size_t row_end, float* y) {
  for (size_t r = row_begin; r < row_end; ++r) {
    const W* row = data + r * cols;
    for (size_t t = 0; t < n_tokens; ++t) {
      y[t * rows + r] = static_cast<float>(Dot16(row, x + t * cols, cols));
    }
  }
}

void DenseRowsHwy(const DenseMatrix& w, const float* x, const double* /*xd*/,
                  size_t n_tokens, size_t row_begin, size_t row_end, float* y) {
  if (w.type == DenseType::kBF16) {
    DenseRowsT(static_cast<const uint16_t*>(w.data), w.rows, w.cols, x,
               n_tokens, row_begin, row_end, y);
  } else {
    DenseRowsT(static_cast<const float*>(w.data), w.rows, w.cols, x, n_tokens,
               row_begin, row_end, y);
  }
}

// Pair sum of lanes: [a0 + a1, b0 + b1].
HWY_INLINE V2 PairSums(V2 a, V2 b) {
  const D2 d;
  return hn::Add(hn::InterleaveLower(d, a, b), hn::InterleaveUpper(d, a, b));
}

// Lane i of a group as the scalar order has it: (p(2i) + p(2i+16)) +
// (p(2i+1) + p(2i+17)). Byte i of the group holds columns 2i (low nibble)
// and 2i+1; kE2m1Pairs gives both values for a byte.
HWY_INLINE V2 LanePair(const uint8_t* p, const float* xg, int i) {
  const D2 d;
  const V2 lo = hn::Mul(hn::LoadU(d, kE2m1Pairs.v + 2 * p[i]),
                        hn::PromoteTo(d, hn::LoadU(F2(), xg + 2 * i)));
  const V2 hi = hn::Mul(hn::LoadU(d, kE2m1Pairs.v + 2 * p[i + 8]),
                        hn::PromoteTo(d, hn::LoadU(F2(), xg + 16 + 2 * i)));
  return hn::Add(lo, hi);  // [a + b, c + d]
}

double Mxfp4RowDot(const uint8_t* packed, const uint8_t* scales, size_t cols,
                   const float* x) {
  double total = 0.0;
  for (size_t g = 0; g < cols / 32; ++g) {
    const uint64_t s = scales[g];
    if (s == 255) continue;  // E8M0 NaN: the group contributes nothing.
    const uint8_t* p = packed + g * 16;
    const float* xg = x + g * 32;
    const V2 l01 = PairSums(LanePair(p, xg, 0), LanePair(p, xg, 1));
    const V2 l23 = PairSums(LanePair(p, xg, 2), LanePair(p, xg, 3));
    const V2 l45 = PairSums(LanePair(p, xg, 4), LanePair(p, xg, 5));
    const V2 l67 = PairSums(LanePair(p, xg, 6), LanePair(p, xg, 7));
    // Lanes i += i+4, then +2, then +1.
    const V2 l = hn::Add(hn::Add(l01, l45), hn::Add(l23, l67));
    const double group = hn::GetLane(l) + hn::ExtractLane(l, 1);
    // 2^(s-127) as a normal double, built from its bits: exact scaling.
    const uint64_t scale_bits = (s + 1023 - 127) << 52;
    double scale;
    __builtin_memcpy(&scale, &scale_bits, sizeof scale);
    total += group * scale;
  }
  return total;
}

void Mxfp4RowsHwy(const Mxfp4Matrix& w, const float* x, const double* /*xd*/,
                  size_t n_tokens, size_t row_begin, size_t row_end, float* y) {
  for (size_t r = row_begin; r < row_end; ++r) {
    const uint8_t* packed = w.packed + r * (w.cols / 2);
    const uint8_t* scales = w.scales + r * (w.cols / 32);
    for (size_t t = 0; t < n_tokens; ++t) {
      y[t * w.rows + r] = static_cast<float>(
          Mxfp4RowDot(packed, scales, w.cols, x + t * w.cols));
    }
  }
}

#endif  // HWY_TARGET == HWY_SCALAR

#if !HWY_NATIVE_FMA
// HWY_SCALAR, or a target whose MulAdd would round twice (SSE4, EMU128):
// attention's float orders are the scalar reference's.
void DotRowsHwy(const float* a, const float* rows, size_t stride, size_t count,
                size_t n, float* out) {
  ScalarTable().dot_f32_rows(a, rows, stride, count, n, out);
}
void AddWeightedRowsHwy(const float* w, const float* rows, size_t stride,
                        size_t count, size_t n, float* acc) {
  ScalarTable().add_weighted_rows(w, rows, stride, count, n, acc);
}
#endif  // !HWY_NATIVE_FMA
}  // namespace HWY_NAMESPACE
}  // namespace flotilla::kernels::internal
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace flotilla::kernels::internal {
namespace {

HWY_EXPORT(DotHwy);
HWY_EXPORT(DenseRowsHwy);
HWY_EXPORT(Mxfp4RowsHwy);
HWY_EXPORT(DotRowsHwy);
HWY_EXPORT(AddWeightedRowsHwy);

double Dot(const float* a, const float* b, size_t n) {
  return HWY_DYNAMIC_DISPATCH(DotHwy)(a, b, n);
}

void DenseRows(const DenseMatrix& w, const float* x, const double* xd,
               size_t n_tokens, size_t row_begin, size_t row_end, float* y) {
  HWY_DYNAMIC_DISPATCH(DenseRowsHwy)(w, x, xd, n_tokens, row_begin, row_end, y);
}

void Mxfp4Rows(const Mxfp4Matrix& w, const float* x, const double* xd,
               size_t n_tokens, size_t row_begin, size_t row_end, float* y) {
  HWY_DYNAMIC_DISPATCH(Mxfp4RowsHwy)(w, x, xd, n_tokens, row_begin, row_end, y);
}

void DotRows(const float* a, const float* rows, size_t stride, size_t count,
             size_t n, float* out) {
  HWY_DYNAMIC_DISPATCH(DotRowsHwy)(a, rows, stride, count, n, out);
}

void AddWeightedRows(const float* w, const float* rows, size_t stride,
                     size_t count, size_t n, float* acc) {
  HWY_DYNAMIC_DISPATCH(AddWeightedRowsHwy)(w, rows, stride, count, n, acc);
}

}  // namespace

const KernelTable& HighwayTable() {
  static const KernelTable table = {
      &Dot,    &DenseRows, &Mxfp4Rows,      nullptr,
      nullptr, &DotRows,   &AddWeightedRows};
  return table;
}

const char* HighwayTargetName() {
  // The dispatcher runs the best target both compiled in and supported by
  // the CPU: the lowest set bit (Highway orders targets best first).
  const int64_t targets = hwy::SupportedTargets() & HWY_TARGETS;
  return hwy::TargetName(targets & -targets);
}

}  // namespace flotilla::kernels::internal
#endif  // HWY_ONCE
