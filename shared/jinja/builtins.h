// Jinja's filters and tests, Python's str/dict methods, item and slice
// access, and the globals transformers gives chat templates (range,
// namespace, dict, raise_exception, strftime_now): what published chat
// templates call. An unknown filter, test or method is an error naming it.
#ifndef FLOTILLA_SHARED_JINJA_BUILTINS_H_
#define FLOTILLA_SHARED_JINJA_BUILTINS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shared/jinja/value.h"

namespace flotilla::jinja::internal {

// The message of a raise_exception() call is kept in this payload so that
// Render() can return it unchanged.
inline constexpr char kRaisedPayload[] = "flotilla.jinja/raised";

absl::StatusOr<Value> CallFilter(const std::string& name, const Value& input,
                                 CallArgs& args);
absl::StatusOr<bool> CallTest(const std::string& name, const Value& subject,
                              CallArgs& args);

// obj.name: a str/dict method bound to obj, a dict entry or namespace
// attribute; undefined when obj has no such attribute. Error on undefined.
absl::StatusOr<Value> GetAttribute(const Value& obj, const std::string& name);
// obj[key]: list/str index (negative from the end), dict entry, else the
// attribute of that name; undefined when absent. Error on undefined.
absl::StatusOr<Value> GetItem(const Value& obj, const Value& key);
// obj[start:stop:step] for lists, tuples and strings.
absl::StatusOr<Value> GetSlice(const Value& obj, const Value& start,
                               const Value& stop, const Value& step);
// The items a for loop visits: list items, dict keys, a string's
// characters; nothing for undefined. Error for other kinds.
absl::StatusOr<std::vector<Value>> Iterate(const Value& v);
// Python's len(); error for kinds without one.
absl::StatusOr<int64_t> Length(const Value& v);

// Strings and lists an expression, filter or method may build: bounded,
// so that doubling a string in a loop or a replace() that multiplies it
// ends with an error instead of exhausting memory.
inline constexpr size_t kMaxBuiltBytes = 64u << 20;
inline constexpr size_t kMaxBuiltItems = 1u << 20;
// ResourceExhausted naming those caps.
absl::Status TooLarge();
// The size of `parts` joined with a separator of `separator_size` bytes.
size_t JoinedSize(const std::vector<std::string>& parts, size_t separator_size);

// An error saying `v` is undefined, naming what it was looked up by.
absl::Status UndefinedError(const Value& v);

Value MakeGlobals(absl::Time now, absl::TimeZone zone);

// Reads a builtin's arguments by position or keyword.
class ArgReader {
 public:
  ArgReader(CallArgs& args, std::string function,
            std::vector<std::string> names);
  // The argument at `index` (or given by its name); undefined if absent.
  Value Get(size_t index) const;
  bool Has(size_t index) const;
  // InvalidArgument for too many positional or unknown keyword arguments.
  absl::Status Check() const;

 private:
  CallArgs& args_;
  std::string function_;
  std::vector<std::string> names_;
};

// UTF-8 text as code points and back (len, indexing and slicing count code
// points as Python does).
std::vector<uint32_t> DecodeUtf8(const std::string& s);
std::string EncodeUtf8(const std::vector<uint32_t>& cps, size_t begin,
                       size_t end);
// Appends one code point's UTF-8 bytes.
void AppendUtf8(std::string* out, uint32_t cp);

}  // namespace flotilla::jinja::internal

#endif  // FLOTILLA_SHARED_JINJA_BUILTINS_H_
