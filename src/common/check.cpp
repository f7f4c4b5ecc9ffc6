#include "aoi/common/check.h"

namespace aoi::detail {

void check_failed(const char* file, int line, const char* condition, const char* message) {
  std::fprintf(stderr, "aoi: check failed at %s:%d: %s (%s)\n", file, line, condition, message);
  std::fflush(stderr);
  std::abort();
}

}  // namespace aoi::detail
