// Internal to pack_manifest.cc: typed, exception-free access to manifest
// JSON with errors that name the JSON path of the offending field.
#ifndef FLOTILLA_SHARED_PACK_PACK_MANIFEST_READER_H_
#define FLOTILLA_SHARED_PACK_PACK_MANIFEST_READER_H_

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace flotilla::pack::internal {

using json = nlohmann::json;

// Checksums are written as 16 hex digits rather than JSON numbers: many JSON
// readers hold numbers as doubles (53 bits), and hex is what `xxhsum -H3`
// prints, so a checksum can be checked by hand.
inline std::string Hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, v);
  return buf;
}

inline bool ParseHex64(const std::string& s, uint64_t* out) {
  if (s.size() != 16) return false;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return false;
    }
    v = v << 4 | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

// A relative path that stays inside its base directory.
inline bool IsSafeRelativePath(const std::string& p) {
  if (p.empty() || p.front() == '/') return false;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    const std::string part = p.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

// Typed field access with errors that name the JSON path. Keeps the first
// error; later calls are no-ops so parsing code reads straight through.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  bool ok() const { return status_.ok(); }
  absl::Status status() const { return status_; }

  void Fail(const std::string& where, const std::string& what) {
    if (status_.ok()) {
      status_ = absl::DataLossError(
          absl::StrCat("pack manifest ", source_, ": ", where, ": ", what));
    }
  }

  // Checks `obj` is an object holding exactly `keys`.
  bool Object(const json& obj, const std::string& where,
              std::initializer_list<const char*> keys) {
    if (!ok()) return false;
    if (!obj.is_object()) {
      Fail(where, "expected an object");
      return false;
    }
    for (const char* k : keys) {
      if (!obj.contains(k)) {
        Fail(where, absl::StrCat("missing field \"", k, "\""));
        return false;
      }
    }
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      if (std::find_if(keys.begin(), keys.end(), [&](const char* k) {
            return it.key() == k;
          }) == keys.end()) {
        Fail(where, absl::StrCat("unknown field \"", it.key(), "\""));
        return false;
      }
    }
    return true;
  }

  // Field `key` of an object Object() has checked; null after an error.
  const json* Get(const json& obj, const char* key) {
    if (!ok()) return nullptr;
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }
  uint64_t U64(const json& obj, const std::string& where, const char* key) {
    const json* v = Get(obj, key);
    if (v == nullptr) return 0;
    if (!v->is_number_unsigned()) {
      Fail(Path(where, key), "expected a non-negative integer");
      return 0;
    }
    return v->get<uint64_t>();
  }
  int Int(const json& obj, const std::string& where, const char* key) {
    const json* v = Get(obj, key);
    if (v == nullptr) return 0;
    if (!v->is_number_integer() || v->get<int64_t>() < INT32_MIN ||
        v->get<int64_t>() > INT32_MAX ||
        (v->is_number_unsigned() && v->get<uint64_t>() > INT32_MAX)) {
      Fail(Path(where, key), "expected a 32-bit integer");
      return 0;
    }
    return static_cast<int>(v->get<int64_t>());
  }
  bool Bool(const json& obj, const std::string& where, const char* key) {
    const json* v = Get(obj, key);
    if (v == nullptr) return false;
    if (!v->is_boolean()) {
      Fail(Path(where, key), "expected a boolean");
      return false;
    }
    return v->get<bool>();
  }
  std::string String(const json& obj, const std::string& where,
                     const char* key) {
    const json* v = Get(obj, key);
    if (v == nullptr) return std::string();
    if (!v->is_string()) {
      Fail(Path(where, key), "expected a string");
      return std::string();
    }
    return v->get<std::string>();
  }
  uint64_t Checksum(const json& obj, const std::string& where,
                    const char* key) {
    const std::string s = String(obj, where, key);
    uint64_t v = 0;
    if (ok() && !ParseHex64(s, &v)) {
      Fail(Path(where, key), "expected 16 lower-case hex digits");
    }
    return v;
  }

  static std::string Path(const std::string& where, const char* key) {
    return where.empty() ? std::string(key) : absl::StrCat(where, ".", key);
  }

 private:
  std::string source_;
  absl::Status status_;
};

}  // namespace flotilla::pack::internal

#endif  // FLOTILLA_SHARED_PACK_PACK_MANIFEST_READER_H_
