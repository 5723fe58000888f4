// CHECK for programmer errors only (never for data from disk or network).
// Debian's Abseil has no absl/log, so this is a minimal replacement.
#ifndef FLOTILLA_SHARED_BASE_CHECK_H_
#define FLOTILLA_SHARED_BASE_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FLOTILLA_CHECK(cond)                                                \
  do {                                                                      \
    if (!(cond)) {                                                          \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
                   #cond);                                                  \
      std::abort();                                                         \
    }                                                                       \
  } while (0)

#endif  // FLOTILLA_SHARED_BASE_CHECK_H_
