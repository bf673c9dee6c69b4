// A minimal PNG encoder (8-bit RGB, zlib-compressed, no filtering) for dataset previews. Kept
// inside synth/ so this layer needs nothing but zlib; an io-level PNG writer can replace it.
//
// Safe to call concurrently for different paths.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vidax::synth {

// The PNG file image of `rgb` (height rows of width * 3 bytes).
std::vector<uint8_t> encode_png_rgb8(const uint8_t* rgb, int64_t width, int64_t height);
// Writes it to `path` through a temporary file renamed into place; InputError naming `path` on
// any I/O failure.
void write_png_rgb8(const std::string& path, const uint8_t* rgb, int64_t width, int64_t height);

}  // namespace vidax::synth
