#include "shared/model/tensor_source.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "shared/base/status_macros.h"
#include "shared/model/float16.h"

namespace flotilla::model {

void TensorSource::ForEachTensor(
    const std::function<void(const TensorInfo&)>& fn) const {
  for (const std::string& name : Names()) {
    if (const TensorInfo* t = Find(name)) fn(*t);
  }
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
    case DType::kU8:
      return "U8";
    case DType::kF8E4M3:
      return "F8_E4M3";
  }
  return "?";
}

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kBF16:
    case DType::kF16:
      return 2;
    case DType::kU8:
    case DType::kF8E4M3:
      return 1;
  }
  return 0;
}

absl::Status TensorSource::ReadRange(const TensorInfo& info, uint64_t begin,
                                     uint64_t n, void* dst) const {
  if (begin > info.nbytes || n > info.nbytes - begin) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", info.name, "': bytes [", begin, ", +", n,
                     ") are outside its ", info.nbytes, " bytes"));
  }
  std::vector<uint8_t> all(info.nbytes);
  FLOTILLA_RETURN_IF_ERROR(ReadRaw(info, all.data()));
  if (n > 0) std::memcpy(dst, all.data() + begin, n);
  return absl::OkStatus();
}

int64_t TensorInfo::numel() const {
  // Shapes are validated (non-negative, product fits) when a source is
  // opened; a scalar's empty shape gives 1.
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::StatusOr<std::vector<float>> TensorSource::ReadF32(
    absl::string_view name, int64_t expected_numel) const {
  const TensorInfo* info = Find(name);
  if (info == nullptr) {
    return absl::NotFoundError(absl::StrCat("tensor '", name, "' not found"));
  }
  const int64_t numel = info->numel();
  if (expected_numel >= 0 && numel != expected_numel) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", name, "' in ", info->file, " has ", numel,
                     " elements (shape [", absl::StrJoin(info->shape, ","),
                     "]), expected ", expected_numel));
  }
  if (info->dtype == DType::kU8 || info->dtype == DType::kF8E4M3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", name, "' in ", info->file, " has dtype ",
        DTypeName(info->dtype), ", which cannot be read as float32 alone"));
  }
  const uint64_t want = static_cast<uint64_t>(numel) * DTypeSize(info->dtype);
  if (info->nbytes != want) {
    return absl::DataLossError(
        absl::StrCat("tensor '", name, "' in ", info->file, ": ", info->nbytes,
                     " bytes for ", numel, " x ", DTypeName(info->dtype)));
  }
  std::vector<float> out(static_cast<size_t>(numel));
  if (numel == 0) return out;
  // Read straight into the result: 16-bit data fills its first half and is
  // widened in place from the back, so float i (bytes 4i..4i+3) only
  // overwrites halves 2i and 2i+1, which are already converted. A 2.3 GB
  // BF16 embedding thus needs no second buffer.
  FLOTILLA_RETURN_IF_ERROR(ReadRaw(*info, out.data()));
  if (info->dtype == DType::kF32) return out;
  const unsigned char* bytes =
      reinterpret_cast<const unsigned char*>(out.data());
  const bool is_bf16 = info->dtype == DType::kBF16;
  for (size_t i = out.size(); i-- > 0;) {
    // Little-endian on disk; assemble explicitly (memcpy of a uint16_t
    // would be host order) and before the store below clobbers it.
    const uint16_t h =
        static_cast<uint16_t>(bytes[2 * i] | (bytes[2 * i + 1] << 8));
    out[i] = is_bf16 ? Bf16ToF32(h) : F16ToF32(h);
  }
  return out;
}

}  // namespace flotilla::model
