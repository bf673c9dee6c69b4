// The process's resident memory, for reports (peak RSS in benchmarks and sidecars) and for the
// page reuse's limit (core/page_buffer.h).
//
//   resident_bytes()       the resident set now (/proc/self/statm; 0 where it cannot be read)
//   peak_resident_bytes()  the peak resident set so far (getrusage's ru_maxrss, = VmHWM)
#pragma once

#include <cstddef>

namespace vidax {

size_t resident_bytes();
size_t peak_resident_bytes();

}  // namespace vidax
