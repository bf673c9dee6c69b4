#include "core/error.h"

#include <cstdio>
#include <cstdlib>

namespace vidax {

void check_failed(const char* file, int line, const char* condition, const std::string& message) {
  std::fprintf(stderr, "vidax internal error at %s:%d: CHECK(%s) failed%s%s\n", file, line,
               condition, message.empty() ? "" : ": ", message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace vidax
