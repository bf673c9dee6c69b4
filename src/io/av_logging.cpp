#include "io/av_logging.h"

#include <cstdlib>
#include <mutex>

extern "C" {
#include <libavutil/log.h>
}

namespace vidax {

void configure_av_logging() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (std::getenv("VIDAX_AV_LOG") == nullptr) av_log_set_level(AV_LOG_QUIET);
  });
}

}  // namespace vidax
