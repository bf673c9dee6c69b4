// PNG images: an 8-bit RGB encoder (zlib deflate, adaptive per-row filters) and an atomic file
// writer. Used for the PNG-folder video output and for single frames (e.g. README frame strips).
// Thread-safe: pure functions; concurrent calls on different paths are fine.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace vidax {

// `rgb` holds height rows of width pixels, 3 bytes each (R, G, B), rows top to bottom:
// [height, width, 3] uint8. `level` is the zlib level (0 = store ... 9 = smallest).
std::vector<uint8_t> encode_png(std::span<const uint8_t> rgb, int64_t width, int64_t height,
                                int level = 6);

// Encodes and writes `path` atomically: "<path>.tmp.<pid>" (registered with io/temp_paths.h),
// fsync, rename into place. Throws InputError naming the path on a bad size or any I/O failure;
// on failure nothing is left at `path` or at the temporary.
void write_png(const std::string& path, std::span<const uint8_t> rgb, int64_t width,
               int64_t height);

}  // namespace vidax
