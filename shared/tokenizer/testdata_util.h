// Test-only helpers for reading the golden files in testdata/.
#ifndef FLOTILLA_SHARED_TOKENIZER_TESTDATA_UTIL_H_
#define FLOTILLA_SHARED_TOKENIZER_TESTDATA_UTIL_H_

#include <zlib.h>

#include <memory>
#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/tokenizer/pretokenizer.h"
#include "shared/tokenizer/tiktoken_bpe.h"
#include "shared/tokenizer/tiktoken_file.h"

namespace flotilla::tokenizer::testing {

inline std::string TestdataPath(const std::string& name) {
  return std::string(FLOTILLA_TOKENIZER_TESTDATA) + "/" + name;
}

// The text of a file, gunzipped when it is gzip (zlib reads plain files
// as they are); a test failure and "" when it cannot be opened.
inline std::string ReadMaybeGz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    ADD_FAILURE() << "cannot open " << path;
    return "";
  }
  std::string text;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) text.append(buf, n);
  gzclose(f);
  return text;
}

// Parses testdata/<name>; a discarded value (with a test failure) on error.
inline nlohmann::json LoadJson(const std::string& name) {
  absl::StatusOr<std::string> text = ReadFileToString(TestdataPath(name));
  if (!text.ok()) {
    ADD_FAILURE() << text.status();
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
  nlohmann::json doc = nlohmann::json::parse(*text, nullptr, false);
  if (doc.is_discarded()) ADD_FAILURE() << name << ": invalid JSON";
  return doc;
}

// Loads testdata/<ranks_file> with the given pre-tokenizer and no added
// tokens; nullptr (with a test failure) on error.
inline std::unique_ptr<TiktokenBpe> LoadBpe(
    const std::string& ranks_file,
    absl::StatusOr<std::unique_ptr<Pretokenizer>> pretokenizer) {
  if (!pretokenizer.ok()) {
    ADD_FAILURE() << pretokenizer.status();
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<TiktokenBpe>> bpe =
      TiktokenBpe::Load(TestdataPath(ranks_file), "", *std::move(pretokenizer));
  if (!bpe.ok()) {
    ADD_FAILURE() << bpe.status();
    return nullptr;
  }
  return *std::move(bpe);
}

// Printable form of a byte string for failure messages.
inline std::string Quote(absl::string_view s) {
  return nlohmann::json(std::string(s))
      .dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

}  // namespace flotilla::tokenizer::testing

#endif  // FLOTILLA_SHARED_TOKENIZER_TESTDATA_UTIL_H_
