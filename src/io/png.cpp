// PNG encoder: signature, IHDR, one IDAT (zlib stream of filtered rows), IEND; CRCs from zlib.
#include "io/png.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <limits>

#include "core/error.h"
#include "io/temp_paths.h"

namespace vidax {
namespace {

constexpr int kChannels = 3;  // RGB, 8 bits each: 3 bytes per pixel for the filters

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  out.push_back(static_cast<uint8_t>(v >> 24));
  out.push_back(static_cast<uint8_t>(v >> 16));
  out.push_back(static_cast<uint8_t>(v >> 8));
  out.push_back(static_cast<uint8_t>(v));
}

void put_chunk(std::vector<uint8_t>& out, const char type[4], std::span<const uint8_t> data) {
  VIDAX_CHECK(data.size() <= 0x7fffffffu, "PNG chunk too large");
  put_u32(out, static_cast<uint32_t>(data.size()));
  const size_t type_at = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  // The CRC covers the type and the data, not the length.
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32_z(crc, out.data() + type_at, out.size() - type_at);
  put_u32(out, static_cast<uint32_t>(crc));
}

uint8_t paeth(int a, int b, int c) {
  const int p = a + b - c;
  const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return static_cast<uint8_t>(a);
  if (pb <= pc) return static_cast<uint8_t>(b);
  return static_cast<uint8_t>(c);
}

// Writes filter byte + filtered row into `dst` (1 + row_bytes), choosing among the five PNG
// filters the one with the smallest sum of |signed residual| (the usual libpng heuristic: small
// residuals deflate well). `prev` is the row above (all zeros for the first row).
void filter_row(const uint8_t* row, const uint8_t* prev, size_t row_bytes, uint8_t* dst,
                std::vector<uint8_t>& scratch) {
  scratch.resize(5 * row_bytes);
  std::array<uint64_t, 5> cost{};
  for (size_t i = 0; i < row_bytes; ++i) {
    const int x = row[i];
    const int a = i >= kChannels ? row[i - kChannels] : 0;   // left
    const int b = prev[i];                                   // up
    const int c = i >= kChannels ? prev[i - kChannels] : 0;  // up-left
    const uint8_t r[5] = {static_cast<uint8_t>(x), static_cast<uint8_t>(x - a),
                          static_cast<uint8_t>(x - b), static_cast<uint8_t>(x - ((a + b) >> 1)),
                          static_cast<uint8_t>(x - paeth(a, b, c))};
    for (int f = 0; f < 5; ++f) {
      scratch[static_cast<size_t>(f) * row_bytes + i] = r[f];
      cost[static_cast<size_t>(f)] += static_cast<uint64_t>(std::abs(static_cast<int8_t>(r[f])));
    }
  }
  size_t best = 0;
  for (size_t f = 1; f < 5; ++f)
    if (cost[f] < cost[best]) best = f;
  dst[0] = static_cast<uint8_t>(best);
  std::copy_n(scratch.data() + best * row_bytes, row_bytes, dst + 1);
}

}  // namespace

std::vector<uint8_t> encode_png(std::span<const uint8_t> rgb, int64_t width, int64_t height,
                                int level) {
  constexpr int64_t kMaxExtent = std::numeric_limits<int32_t>::max();
  if (width <= 0 || height <= 0 || width > kMaxExtent || height > kMaxExtent)
    throw_input_error("PNG image: expected width and height in [1, ", kMaxExtent, "], got ", width,
                      "x", height);
  const size_t row_bytes = static_cast<size_t>(width) * kChannels;
  if (rgb.size() != row_bytes * static_cast<size_t>(height))
    throw_input_error("PNG image ", width, "x", height, ": expected ", row_bytes * height,
                      " RGB bytes, got ", rgb.size());
  VIDAX_CHECK(level >= 0 && level <= 9, "zlib level ", level);

  std::vector<uint8_t> filtered(static_cast<size_t>(height) * (row_bytes + 1));  // [H, 1+3W]
  const std::vector<uint8_t> zero_row(row_bytes, 0);
  std::vector<uint8_t> scratch;
  for (int64_t y = 0; y < height; ++y) {
    const uint8_t* row = rgb.data() + static_cast<size_t>(y) * row_bytes;
    const uint8_t* prev = y > 0 ? row - row_bytes : zero_row.data();
    filter_row(row, prev, row_bytes, filtered.data() + static_cast<size_t>(y) * (row_bytes + 1),
               scratch);
  }

  uLongf packed_size = compressBound(filtered.size());
  std::vector<uint8_t> packed(packed_size);
  const int rc = compress2(packed.data(), &packed_size, filtered.data(), filtered.size(), level);
  if (rc == Z_MEM_ERROR) throw std::bad_alloc();
  VIDAX_CHECK(rc == Z_OK, "zlib compress2 failed: ", rc);
  packed.resize(packed_size);

  std::vector<uint8_t> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<uint8_t> ihdr;
  put_u32(ihdr, static_cast<uint32_t>(width));
  put_u32(ihdr, static_cast<uint32_t>(height));
  ihdr.insert(ihdr.end(),
              {8, 2, 0, 0, 0});  // 8 bits, truecolour RGB, deflate, filters, no interlace
  put_chunk(out, "IHDR", ihdr);
  put_chunk(out, "IDAT", packed);
  put_chunk(out, "IEND", {});
  return out;
}

void write_png(const std::string& path, std::span<const uint8_t> rgb, int64_t width,
               int64_t height) {
  if (path.empty() || path.back() == '/')
    throw_input_error("PNG output '", path, "': expected a file path such as frame.png");
  const std::vector<uint8_t> png = encode_png(rgb, width, height);
  const std::string temp = temp_path_for(path);
  TempPathGuard guard = TempPathGuard::file(temp);
  try {
    write_whole_file(temp, png, /*sync=*/true);
    rename_into_place(temp, path);
  } catch (...) {
    ::unlink(temp.c_str());
    throw;
  }
}

}  // namespace vidax
