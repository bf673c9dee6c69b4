// Reading still images for image-to-video conditioning: PNG (FFmpeg's decoder), JPEG
// (libjpeg-turbo, the library PIL decodes with, at its defaults: ISLOW DCT, fancy upsampling)
// and WebP (libwebp, as PIL), recognised by content, converted to 8-bit RGB the way PIL's
// `Image.open(path).convert("RGB")` does (alpha dropped, grey replicated, palettes looked up,
// 16-bit samples reduced to their high byte). Thread-safe: pure functions of the file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace vidax {

struct RgbImage {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // [height, width, 3], rows top to bottom
};

// Limits for hostile files: at most this many pixels and bytes.
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 28;
inline constexpr int64_t kMaxImageFileBytes = int64_t{1} << 30;

// Throws InputError naming `path` for a missing, unreadable, truncated or unsupported file (an
// animated WebP, a JPEG in CMYK) or one larger than the limits.
RgbImage read_image(const std::string& path);

// The same from bytes in memory; `name` labels errors (fuzz targets, HTTP uploads).
RgbImage decode_image(std::span<const uint8_t> bytes, const std::string& name);

}  // namespace vidax
