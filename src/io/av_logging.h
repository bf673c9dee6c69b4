// libav (FFmpeg) prints to stderr by default (x264 banners, decoder warnings such as "chunk too
// big"); vidax reports errors itself, in one line. Every user of libav calls this first.
// VIDAX_AV_LOG=<anything> keeps libav's own logging for debugging. Thread-safe (once).
#pragma once

namespace vidax {

void configure_av_logging();

}  // namespace vidax
