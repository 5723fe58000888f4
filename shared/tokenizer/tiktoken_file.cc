#include "shared/tokenizer/tiktoken_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "shared/base/open_file.h"
#include "shared/base/status_macros.h"
#include "shared/model/json_util.h"

namespace flotilla::tokenizer {
namespace {

absl::Status LineError(absl::string_view source, int line,
                       absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(source, ":", line, ": ", msg));
}

// Maps a base64 alphabet character to its 6-bit value, or -1.
int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Parses a decimal id/rank in [0, kMaxTokenId].
bool ParseId(absl::string_view s, int32_t* out) {
  if (s.empty() || s.size() > 9) return false;
  int64_t v = 0;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
    v = v * 10 + (c - '0');
  }
  if (v > kMaxTokenId) return false;
  *out = static_cast<int32_t>(v);
  return true;
}

}  // namespace

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  // Not a FIFO or device: those would block or never end.
  FLOTILLA_ASSIGN_OR_RETURN(const int fd, base::OpenForRead(path));
  std::string out;
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) out.reserve(st.st_size);
  char buf[1 << 16];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      close(fd);
      return absl::UnavailableError(
          absl::StrCat(path, ": read failed: ", std::strerror(err)));
    }
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

absl::StatusOr<std::string> StrictBase64Decode(absl::string_view in) {
  if (in.size() % 4 != 0) {
    return absl::InvalidArgumentError("base64 length is not a multiple of 4");
  }
  std::string out;
  out.reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    const bool last = i + 4 == in.size();
    int pad = 0;
    if (last && in[i + 3] == '=') pad = in[i + 2] == '=' ? 2 : 1;
    uint32_t acc = 0;
    for (int k = 0; k < 4; ++k) {
      int v = 0;
      if (k < 4 - pad) {
        v = Base64Value(in[i + k]);
        if (v < 0) return absl::InvalidArgumentError("invalid base64 char");
      }
      acc = (acc << 6) | static_cast<uint32_t>(v);
    }
    // Bits below the last full byte must be zero in canonical base64.
    if ((pad == 1 && (acc & 0xFF)) || (pad == 2 && (acc & 0xFFFF))) {
      return absl::InvalidArgumentError("non-canonical base64 padding bits");
    }
    out.push_back(static_cast<char>(acc >> 16));
    if (pad < 2) out.push_back(static_cast<char>((acc >> 8) & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(acc & 0xFF));
  }
  return out;
}

absl::StatusOr<std::vector<RankEntry>> ParseTiktokenModel(
    absl::string_view contents, absl::string_view source) {
  std::vector<RankEntry> entries;
  entries.reserve(std::count(contents.begin(), contents.end(), '\n') + 1);
  // 1-based line of each rank / token seen so far, for duplicate errors.
  // Tokens are keyed by their base64 text (a view into `contents`):
  // StrictBase64Decode accepts one spelling per byte string, so equal
  // bytes means equal text, and no decoded copy is hashed.
  std::vector<int> rank_line;
  absl::flat_hash_map<absl::string_view, int> token_line;
  token_line.reserve(entries.capacity());
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(contents, '\n')) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    if (fields.size() != 2) {
      return LineError(source, line_no,
                       "expected 'base64 rank' separated by one space");
    }
    int32_t rank = 0;
    if (!ParseId(fields[1], &rank)) {
      return LineError(source, line_no,
                       absl::StrCat("bad rank '", fields[1], "'"));
    }
    absl::StatusOr<std::string> bytes = StrictBase64Decode(fields[0]);
    if (!bytes.ok()) {
      return LineError(source, line_no, bytes.status().message());
    }
    if (bytes->empty()) return LineError(source, line_no, "empty token");
    if (static_cast<size_t>(rank) >= rank_line.size()) {
      rank_line.resize(rank + 1, 0);
    }
    if (rank_line[rank] != 0) {
      return LineError(source, line_no,
                       absl::StrCat("duplicate rank ", rank, " (first on line ",
                                    rank_line[rank], ")"));
    }
    rank_line[rank] = line_no;
    auto [bit, bytes_new] = token_line.emplace(fields[0], line_no);
    if (!bytes_new) {
      return LineError(source, line_no,
                       absl::StrCat("duplicate token ", fields[0],
                                    " (first on line ", bit->second, ")"));
    }
    entries.push_back({*std::move(bytes), rank});
  }
  if (entries.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": no tokens"));
  }
  return entries;
}

absl::StatusOr<std::vector<AddedToken>> ParseAddedTokens(
    absl::string_view json_text, absl::string_view source) {
  using nlohmann::json;
  // allow_exceptions=false: malformed input yields a discarded value.
  auto error = [&](absl::string_view msg) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", msg));
  };
  absl::StatusOr<json> parsed = model::internal::ParseJson(json_text, source);
  if (!parsed.ok()) return parsed.status();
  const json& doc = *parsed;
  if (!doc.is_object()) return error("top level is not an object");
  const auto it = doc.find("added_tokens_decoder");
  if (it == doc.end()) return error("missing added_tokens_decoder");
  if (!it->is_object()) return error("added_tokens_decoder is not an object");
  std::vector<AddedToken> out;
  for (const auto& [key, value] : it->items()) {
    AddedToken token;
    if (!ParseId(key, &token.id)) {
      return error(absl::StrCat("added token id '", key, "' is not a number"));
    }
    if (!value.is_object()) {
      return error(absl::StrCat("added token ", key, " is not an object"));
    }
    const auto content = value.find("content");
    if (content == value.end() || !content->is_string()) {
      return error(absl::StrCat("added token ", key, " has no string content"));
    }
    token.content = content->get<std::string>();
    if (token.content.empty()) {
      return error(absl::StrCat("added token ", key, " has empty content"));
    }
    const auto special = value.find("special");
    if (special != value.end()) {
      if (!special->is_boolean()) {
        return error(absl::StrCat("added token ", key, ": special not bool"));
      }
      token.special = special->get<bool>();
    }
    out.push_back(std::move(token));
  }
  std::sort(
      out.begin(), out.end(),
      [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  return out;
}

}  // namespace flotilla::tokenizer
