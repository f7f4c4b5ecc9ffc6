// AOI_CHECK: programmer errors (broken invariants), never bad input. Prints file:line and aborts.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace aoi::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* condition, const char* message);
}  // namespace aoi::detail

#define AOI_CHECK(cond, message)                                                  \
  do {                                                                            \
    if (!(cond)) ::aoi::detail::check_failed(__FILE__, __LINE__, #cond, message); \
  } while (0)
