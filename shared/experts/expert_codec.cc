#include "shared/experts/expert_codec.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "shared/base/check.h"
#include "shared/kernels/fp8.h"
#include "shared/kernels/kernels.h"

namespace flotilla::experts {
namespace {

// MXFP4: `weight_packed` U8 [rows][cols/2] (two 4-bit values a byte) and
// `weight_scale` U8 [rows][cols/32] (one E8M0 scale per 32 values).
uint64_t Mxfp4PartBytes(int part, uint64_t rows, uint64_t cols) {
  return part == 0 ? rows * cols / 2 : rows * cols / 32;
}

absl::Status Mxfp4CheckShape(uint64_t rows, uint64_t cols) {
  if (cols % 32 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("MXFP4 expert matrix [", rows, ",", cols,
                     "]: its width must be a multiple of 32 (the group size)"));
  }
  return absl::OkStatus();
}

void Mxfp4MatMul(const uint8_t* const* part, const MatrixShape& s,
                 const float* x, size_t n, float* y, kernels::ThreadPool* pool,
                 std::vector<float>*) {
  kernels::Mxfp4Matrix w;
  w.packed = part[0];
  w.scales = part[1];
  w.rows = s.rows;
  w.cols = s.cols;
  kernels::MatMulMxfp4(w, x, n, y, pool);
}

// MXFP4 with a bias (gpt-oss): the two MXFP4 parts, then an F32 `bias`
// [rows] added to each product. The bias may sit off a float boundary in a
// run, so it is read with memcpy.
uint64_t Mxfp4BiasPartBytes(int part, uint64_t rows, uint64_t cols) {
  return part < 2 ? Mxfp4PartBytes(part, rows, cols) : rows * sizeof(float);
}

void Mxfp4BiasMatMul(const uint8_t* const* part, const MatrixShape& s,
                     const float* x, size_t n, float* y,
                     kernels::ThreadPool* pool, std::vector<float>* scratch) {
  Mxfp4MatMul(part, s, x, n, y, pool, scratch);
  scratch->resize(s.rows);
  std::memcpy(scratch->data(), part[2], s.rows * sizeof(float));
  for (size_t t = 0; t < n; ++t) {
    float* row = y + t * s.rows;
    for (uint64_t r = 0; r < s.rows; ++r) row[r] += (*scratch)[r];
  }
}

// Scale byte 255 is E8M0's NaN: the kernels read it as 0 and Hugging Face
// as 2^128, so no answer would be right; a bias must be finite.
absl::Status Mxfp4BiasCheckValues(const uint8_t* const* part,
                                  const MatrixShape& s) {
  const uint64_t scales = Mxfp4PartBytes(1, s.rows, s.cols);
  for (uint64_t i = 0; i < scales; ++i) {
    if (part[1][i] == 255) {
      return absl::InvalidArgumentError(
          absl::StrCat("scale ", i, " is 255 (E8M0 NaN)"));
    }
  }
  for (uint64_t r = 0; r < s.rows; ++r) {
    float b;
    std::memcpy(&b, part[2] + r * sizeof(float), sizeof(float));
    if (!std::isfinite(b)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bias ", r, " is ", b, " (not finite)"));
    }
  }
  return absl::OkStatus();
}

absl::Status AnyShape(uint64_t, uint64_t) { return absl::OkStatus(); }

// Dense `weight` [rows][cols] of `elem`-byte values.
template <size_t elem>
uint64_t DensePartBytes(int, uint64_t rows, uint64_t cols) {
  return rows * cols * elem;
}

template <kernels::DenseType type, size_t elem>
void DenseMatMul(const uint8_t* const* part, const MatrixShape& s,
                 const float* x, size_t n, float* y, kernels::ThreadPool* pool,
                 std::vector<float>* scratch) {
  const uint8_t* data = part[0];
  if (reinterpret_cast<uintptr_t>(data) % elem != 0) {
    // The kernels read the matrix as float / uint16_t; keep that defined.
    const size_t bytes = s.rows * s.cols * elem;
    scratch->resize((bytes + sizeof(float) - 1) / sizeof(float));
    std::memcpy(scratch->data(), data, bytes);
    data = reinterpret_cast<const uint8_t*>(scratch->data());
  }
  kernels::DenseMatrix w;
  w.type = type;
  w.data = data;
  w.rows = s.rows;
  w.cols = s.cols;
  kernels::MatMul(w, x, n, y, pool);
}

// FP8 e4m3: `weight` [rows][cols] codes and `weight_scale_inv` F32
// [ceil(rows/128)][ceil(cols/128)], computed on the codes (MatMulFp8). The
// scales are copied aside when a run places them off a float boundary.
uint64_t Fp8PartBytes(int part, uint64_t rows, uint64_t cols) {
  const uint64_t b = kernels::kFp8Block;
  return part == 0 ? rows * cols
                   : ((rows + b - 1) / b) * ((cols + b - 1) / b) * 4;
}

void Fp8MatMul(const uint8_t* const* part, const MatrixShape& s, const float* x,
               size_t n, float* y, kernels::ThreadPool* pool,
               std::vector<float>* scratch) {
  kernels::Fp8BlockMatrix w;
  w.codes = part[0];
  w.rows = s.rows;
  w.cols = s.cols;
  if (reinterpret_cast<uintptr_t>(part[1]) % sizeof(float) != 0) {
    const uint64_t bytes = Fp8PartBytes(1, s.rows, s.cols);
    scratch->resize(bytes / sizeof(float));
    std::memcpy(scratch->data(), part[1], bytes);
    w.scale_inv = scratch->data();
  } else {
    w.scale_inv = reinterpret_cast<const float*>(part[1]);
  }
  kernels::MatMulFp8(w, x, n, y, pool);
}

absl::Status Fp8CheckValues(const uint8_t* const* part, const MatrixShape& s) {
  std::vector<float> scratch;
  kernels::Fp8BlockMatrix w;
  w.codes = part[0];
  w.rows = s.rows;
  w.cols = s.cols;
  const uint64_t bytes = Fp8PartBytes(1, s.rows, s.cols);
  scratch.resize(bytes / sizeof(float));
  std::memcpy(scratch.data(), part[1], bytes);
  w.scale_inv = scratch.data();
  return kernels::CheckFp8Matrix(w);
}

// The formats: one entry each.
const ExpertCodec kCodecs[] = {
    {ExpertFormat::kMxfp4,
     "mxfp4",
     2,
     {"weight_packed", "weight_scale"},
     &Mxfp4PartBytes,
     &Mxfp4CheckShape,
     &Mxfp4MatMul},
    {ExpertFormat::kF32,
     "f32",
     1,
     {"weight", ""},
     &DensePartBytes<4>,
     &AnyShape,
     &DenseMatMul<kernels::DenseType::kF32, 4>},
    {ExpertFormat::kBF16,
     "bf16",
     1,
     {"weight", ""},
     &DensePartBytes<2>,
     &AnyShape,
     &DenseMatMul<kernels::DenseType::kBF16, 2>},
    {ExpertFormat::kFp8,
     "fp8_e4m3",
     2,
     {"weight", "weight_scale_inv"},
     &Fp8PartBytes,
     &AnyShape,
     &Fp8MatMul,
     &Fp8CheckValues},
    {ExpertFormat::kMxfp4Bias,
     "mxfp4_bias",
     3,
     {"weight_packed", "weight_scale", "bias"},
     &Mxfp4BiasPartBytes,
     &Mxfp4CheckShape,
     &Mxfp4BiasMatMul,
     &Mxfp4BiasCheckValues},
};

}  // namespace

uint64_t ExpertCodec::MatrixBytes(uint64_t rows, uint64_t cols) const {
  uint64_t total = 0;
  for (int p = 0; p < parts; ++p) total += part_bytes(p, rows, cols);
  return total;
}

absl::Status CheckRunValues(const ExpertCodec& codec, const uint8_t* run,
                            const uint64_t* tensor_offsets,
                            const std::array<MatrixShape, 3>& shapes) {
  if (codec.check_values == nullptr) return absl::OkStatus();
  static constexpr const char* kWhich[3] = {"gate (w1)", "down (w2)",
                                            "up (w3)"};
  for (int w = 0; w < 3; ++w) {
    const uint8_t* part[3] = {};
    for (int p = 0; p < codec.parts; ++p) {
      part[p] = run + tensor_offsets[codec.parts * w + p];
    }
    if (absl::Status s = codec.check_values(part, shapes[w]); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the ", kWhich[w], " matrix: ", s.message()));
    }
  }
  return absl::OkStatus();
}

const ExpertCodec& CodecOf(ExpertFormat format) {
  for (const ExpertCodec& c : kCodecs) {
    if (c.format == format) return c;
  }
  FLOTILLA_CHECK(false);  // every ExpertFormat has an entry above
  return kCodecs[0];
}

absl::StatusOr<const ExpertCodec*> CodecNamed(absl::string_view name,
                                              const std::string& source) {
  std::string known;
  for (const ExpertCodec& c : kCodecs) {
    if (name == c.name) return &c;
    absl::StrAppend(&known, known.empty() ? "" : ", ", c.name);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      source, ": unknown expert_format \"", name, "\" (expected ", known, ")"));
}

}  // namespace flotilla::experts
