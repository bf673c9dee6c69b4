// PNG = signature + IHDR + IDAT (zlib stream of filter-type-0 rows) + IEND, each chunk with a
// CRC-32 from zlib.
#include "synth/synth_png.h"

#include <unistd.h>
#include <zlib.h>

#include <cstdio>

#include "core/error.h"

namespace vidax::synth {
namespace {

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
}

void chunk(std::vector<uint8_t>& out, const char type[4], const std::vector<uint8_t>& data) {
  put_u32(out, static_cast<uint32_t>(data.size()));
  const size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  const uLong crc = crc32(0L, out.data() + start, static_cast<uInt>(out.size() - start));
  put_u32(out, static_cast<uint32_t>(crc));
}

}  // namespace

std::vector<uint8_t> encode_png_rgb8(const uint8_t* rgb, int64_t width, int64_t height) {
  VIDAX_CHECK(width > 0 && height > 0 && width * 3 < (int64_t{1} << 30), "bad PNG size ", width,
              "x", height);
  const size_t row = static_cast<size_t>(width) * 3;
  std::vector<uint8_t> raw;
  raw.reserve((row + 1) * static_cast<size_t>(height));
  for (int64_t y = 0; y < height; ++y) {
    raw.push_back(0);  // filter type: none
    const uint8_t* src = rgb + static_cast<size_t>(y) * row;
    raw.insert(raw.end(), src, src + row);
  }
  uLongf packed_size = compressBound(static_cast<uLong>(raw.size()));
  std::vector<uint8_t> packed(packed_size);
  VIDAX_CHECK(
      compress2(packed.data(), &packed_size, raw.data(), static_cast<uLong>(raw.size()), 6) == Z_OK,
      "zlib compress2 failed");
  packed.resize(packed_size);

  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<uint8_t> ihdr;
  put_u32(ihdr, static_cast<uint32_t>(width));
  put_u32(ihdr, static_cast<uint32_t>(height));
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});  // 8 bits, truecolour, deflate, no filter, no interlace
  chunk(png, "IHDR", ihdr);
  chunk(png, "IDAT", packed);
  chunk(png, "IEND", {});
  return png;
}

void write_png_rgb8(const std::string& path, const uint8_t* rgb, int64_t width, int64_t height) {
  const std::vector<uint8_t> png = encode_png_rgb8(rgb, width, height);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw_input_error(path, ": cannot create file");
  const bool ok = std::fwrite(png.data(), 1, png.size(), f) == png.size();
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw_input_error(path, ": cannot write file");
  }
}

}  // namespace vidax::synth
