// Project-prefixed Status helpers. Debian's Abseil (20220623) ships neither
// RETURN_IF_ERROR nor ASSIGN_OR_RETURN, so we carry our own.
#ifndef FLOTILLA_SHARED_BASE_STATUS_MACROS_H_
#define FLOTILLA_SHARED_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#define FLOTILLA_CONCAT_INNER_(a, b) a##b
#define FLOTILLA_CONCAT_(a, b) FLOTILLA_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` yields a non-OK status.
#define FLOTILLA_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    ::absl::Status flotilla_status_ = (expr);            \
    if (!flotilla_status_.ok()) return flotilla_status_; \
  } while (0)

#define FLOTILLA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                    \
  if (!tmp.ok()) return tmp.status();                   \
  lhs = std::move(tmp).value()

// `lhs` may be a declaration: FLOTILLA_ASSIGN_OR_RETURN(auto x, MakeX());
#define FLOTILLA_ASSIGN_OR_RETURN(lhs, expr) \
  FLOTILLA_ASSIGN_OR_RETURN_IMPL_(           \
      FLOTILLA_CONCAT_(flotilla_statusor_, __LINE__), lhs, expr)

namespace flotilla::base {

// `status` with "context: " in front of its message and the same code, so an
// error from deep down says where it surfaced; OK stays OK.
inline absl::Status WithContext(const absl::Status& status,
                                absl::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(context, ": ", status.message()));
}

}  // namespace flotilla::base

#endif  // FLOTILLA_SHARED_BASE_STATUS_MACROS_H_
