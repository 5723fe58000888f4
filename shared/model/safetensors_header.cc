#include "shared/model/safetensors_header.h"

#include <algorithm>
#include <limits>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "shared/base/status_macros.h"
#include "shared/model/json_util.h"

namespace flotilla::model::internal {
namespace {

using json = nlohmann::json;

bool ParseDType(const std::string& name, DType* out) {
  if (name == "F32") {
    *out = DType::kF32;
  } else if (name == "BF16") {
    *out = DType::kBF16;
  } else if (name == "F16") {
    *out = DType::kF16;
  } else if (name == "U8") {
    *out = DType::kU8;
  } else if (name == "F8_E4M3") {
    *out = DType::kF8E4M3;
  } else {
    return false;
  }
  return true;
}

// A JSON number usable as a size or offset: a non-negative integer.
bool AsU64(const json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(v.get<int64_t>());
    return true;
  }
  return false;
}

class EntryParser {
 public:
  EntryParser(const io::File& file, uint64_t data_start)
      : file_(file), data_start_(data_start) {}

  absl::StatusOr<TensorInfo> Parse(const std::string& name,
                                   const json& entry) const {
    if (!entry.is_object()) return Bad(name, "entry is not an object");
    auto dtype_it = entry.find("dtype");
    auto shape_it = entry.find("shape");
    auto offs_it = entry.find("data_offsets");
    if (dtype_it == entry.end() || shape_it == entry.end() ||
        offs_it == entry.end()) {
      return Bad(name, "entry needs dtype, shape and data_offsets");
    }
    TensorInfo info;
    info.name = name;
    info.file = file_.path();
    if (!dtype_it->is_string()) return Bad(name, "dtype is not a string");
    const std::string& dtype = dtype_it->get_ref<const std::string&>();
    if (!ParseDType(dtype, &info.dtype)) {
      return Bad(name, absl::StrCat("unsupported dtype '", dtype,
                                    "' (supported: F32, BF16, F16, U8)"));
    }
    if (!shape_it->is_array()) return Bad(name, "shape is not an array");
    // numel and byte count must fit int64 / uint64: the header is
    // untrusted, and an overflowed product could match a small span.
    uint64_t numel = 1;
    for (const json& d : *shape_it) {
      uint64_t dim;
      if (!AsU64(d, &dim)) {
        return Bad(name, absl::StrCat("shape ", DescribeJson(*shape_it),
                                      " holds a non-integer or negative"));
      }
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          __builtin_mul_overflow(numel, dim, &numel) ||
          numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Bad(name, absl::StrCat("shape ", DescribeJson(*shape_it),
                                      " overflows"));
      }
      info.shape.push_back(static_cast<int64_t>(dim));
    }
    uint64_t nbytes;
    if (__builtin_mul_overflow(numel, DTypeSize(info.dtype), &nbytes)) {
      return Bad(name, "byte count overflows");
    }
    uint64_t begin, end;
    if (!offs_it->is_array() || offs_it->size() != 2 ||
        !AsU64((*offs_it)[0], &begin) || !AsU64((*offs_it)[1], &end)) {
      return Bad(name, absl::StrCat("data_offsets ", DescribeJson(*offs_it),
                                    " is not two non-negative integers"));
    }
    if (end < begin) {
      return Bad(name, absl::StrCat("data_offsets [", begin, ", ", end,
                                    ") ends before it begins"));
    }
    if (end - begin != nbytes) {
      return Bad(name, absl::StrCat(
                           "data_offsets [", begin, ", ", end, ") span ",
                           end - begin, " bytes but ", dtype, " shape [",
                           absl::StrJoin(info.shape, ","), "] needs ", nbytes));
    }
    const uint64_t data_size = file_.size() - data_start_;
    if (end > data_size) {
      return Bad(name, absl::StrCat("data_offsets [", begin, ", ", end,
                                    ") run past the end of the data (",
                                    data_size, " bytes; file is ", file_.size(),
                                    " bytes): truncated file?"));
    }
    info.offset = data_start_ + begin;
    info.nbytes = nbytes;
    return info;
  }

 private:
  absl::Status Bad(const std::string& name, absl::string_view why) const {
    return absl::InvalidArgumentError(
        absl::StrCat(file_.path(), ": tensor '", name, "': ", why));
  }

  const io::File& file_;
  uint64_t data_start_;
};

}  // namespace

absl::StatusOr<std::vector<TensorInfo>> ReadSafetensorsHeader(
    const io::File& file) {
  const std::string& path = file.path();
  if (file.size() < 8) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", file.size(), " bytes is too small for a safetensors file"));
  }
  unsigned char len_bytes[8];
  FLOTILLA_RETURN_IF_ERROR(file.ReadExact(0, len_bytes, 8, "header length"));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];  // little-endian
  if (n > file.size() - 8) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": header length ", n, " exceeds the file size (",
                     file.size(), " bytes): not safetensors, or truncated"));
  }
  if (n > kMaxHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": header length ", n, " exceeds the ",
                     kMaxHeaderBytes, "-byte limit"));
  }
  std::string text(n, '\0');
  FLOTILLA_RETURN_IF_ERROR(file.ReadExact(8, text.data(), n, "header"));
  FLOTILLA_ASSIGN_OR_RETURN(json header,
                            ParseJson(text, absl::StrCat(path, " (header)")));
  if (!header.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": header is a JSON ", header.type_name(), ", not an object"));
  }
  EntryParser parser(file, 8 + n);
  std::vector<TensorInfo> tensors;
  tensors.reserve(header.size());
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      // Free-form, but as the format defines it: strings to strings.
      if (!it->is_object()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": __metadata__ is a JSON ", it->type_name(),
                         ", not an object of strings"));
      }
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ": __metadata__ '", absl::CEscape(m.key()),
                           "' is a JSON ", m->type_name(), ", not a string"));
        }
      }
      continue;
    }
    if (it.key().empty() || it.key().find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor name '", absl::CEscape(it.key()),
                       "' is empty or holds a NUL byte"));
    }
    FLOTILLA_ASSIGN_OR_RETURN(TensorInfo info, parser.Parse(it.key(), *it));
    tensors.push_back(std::move(info));
  }
  // As the reference implementation reads it: sorted by offset, the
  // tensors tile the data section from its first byte to the file's last,
  // with no gap, overlap or trailing bytes. Anything else means the header
  // and the data disagree (a header length off by a byte shifts every
  // tensor), and reading on would compute with misplaced weights.
  std::sort(tensors.begin(), tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) {
              return a.offset != b.offset ? a.offset < b.offset
                                          : a.nbytes < b.nbytes;
            });
  const uint64_t data_start = 8 + n;
  uint64_t covered = 0;  // relative to data_start
  const TensorInfo* prev = nullptr;
  for (const TensorInfo& t : tensors) {
    const uint64_t begin = t.offset - data_start;
    if (begin < covered) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensors '", prev->name, "' and '", t.name,
                       "' overlap in the data area"));
    }
    if (begin > covered) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor '", t.name, "' starts at data offset ", begin,
          " but the tensors before it end at ", covered, " (", begin - covered,
          " unaccounted bytes): the header does not describe the data"));
    }
    covered = begin + t.nbytes;
    prev = &t;
  }
  if (covered != file.size() - data_start) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": the tensors cover ", covered, " bytes of the ",
        file.size() - data_start, "-byte data section (header length ", n,
        "): the header does not describe the data (wrong header length, or "
        "bytes appended)"));
  }
  return tensors;
}

}  // namespace flotilla::model::internal
