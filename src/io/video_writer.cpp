// VideoWriter::open (format by path, spec checks), the official float→uint8 rule, frame checks.
#include "io/video_writer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "io/video_writer_internal.h"

namespace vidax {
namespace {

constexpr const char* kAcceptedForms =
    "expected a path ending in .mp4 (H.264), .webm (VP9), or a folder for PNG frames (a path "
    "ending in '/' or without an extension)";

// One value, exactly the float32 sequence of torch in cache_video (clamp, make_grid's
// sub_(-1).div_(2), * 255, .type(uint8) truncating toward zero). Kept as separate statements so
// that no step is reassociated.
inline uint8_t wan_byte(float x) {
  if (std::isnan(x)) return 0;
  float v = std::min(std::max(x, -1.0f), 1.0f);
  v = v + 1.0f;
  v = v / 2.0f;
  v = v * 255.0f;
  return static_cast<uint8_t>(static_cast<int>(v));
}

}  // namespace

VideoFormat video_format_for_path(const std::string& path) {
  if (path.empty()) throw_input_error("video output path is empty: ", kAcceptedForms);
  if (path.back() == '/') return VideoFormat::kPngFolder;
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (ext.empty()) return VideoFormat::kPngFolder;
  if (ext == ".mp4") return VideoFormat::kMp4;
  if (ext == ".webm") return VideoFormat::kWebm;
  throw_input_error("video output ", path, ": unsupported extension '", ext, "'; ", kAcceptedForms);
}

std::vector<uint8_t> to_uint8_rgb(const Tensor& frames) {
  if (!frames.defined() || frames.rank() != 4 || frames.dim(0) != 3 || !is_float(frames.dtype()))
    throw_input_error("video frames: expected a float tensor [3, frames, height, width], got ",
                      frames.defined() ? frames.describe() : std::string("an empty tensor"));
  const Tensor f = frames.dtype() == DType::kF32 ? frames.contiguous() : frames.to(DType::kF32);
  const int64_t n = f.dim(1), h = f.dim(2), w = f.dim(3);
  const int64_t plane = h * w;                                 // pixels per frame
  const int64_t channel = n * plane;                           // elements per channel
  const float* src = f.data<float>();                          // [3, n, H, W]
  std::vector<uint8_t> out(static_cast<size_t>(3 * channel));  // [n, H, W, 3]
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < n * h; ++row) {
    const int64_t base = row * w;  // offset of this (frame, y) row inside one channel
    uint8_t* dst = out.data() + base * 3;
    for (int64_t x = 0; x < w; ++x) {
      dst[3 * x + 0] = wan_byte(src[base + x]);
      dst[3 * x + 1] = wan_byte(src[channel + base + x]);
      dst[3 * x + 2] = wan_byte(src[2 * channel + base + x]);
    }
  }
  return out;
}

std::unique_ptr<VideoWriter> VideoWriter::open(const std::string& path, const VideoSpec& spec) {
  const VideoFormat format = video_format_for_path(path);
  if (spec.width <= 0 || spec.height <= 0 || spec.width > 16384 || spec.height > 16384)
    throw_input_error("video output ", path, ": expected width and height in [1, 16384], got ",
                      spec.width, "x", spec.height);
  if (format != VideoFormat::kPngFolder && (spec.width % 2 != 0 || spec.height % 2 != 0))
    throw_input_error("video output ", path, ": ", spec.width, "x", spec.height,
                      " has an odd side, but YUV 4:2:0 video needs even width and height (Wan "
                      "sizes are multiples of 16); write a PNG folder for odd sizes");
  if (!(spec.fps > 0 && spec.fps <= 1000))
    throw_input_error("video output ", path, ": expected fps in (0, 1000], got ", spec.fps);
  const int max_crf = format == VideoFormat::kWebm ? 63 : 51;
  if (format != VideoFormat::kPngFolder && (spec.crf < -1 || spec.crf > max_crf))
    throw_input_error("video output ", path, ": expected crf in [0, ", max_crf,
                      "] or -1 for the codec default, got ", spec.crf);
  if (format == VideoFormat::kPngFolder) return video_detail::open_png_folder_writer(path, spec);
  // The final rename would fail with EISDIR after the whole run; refuse now.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw_input_error("video output ", path,
                      ": a folder with this name exists; choose another "
                      "name, or end the path with '/' to write PNG frames into a new folder");
  return video_detail::open_ffmpeg_writer(path, format, spec);
}

namespace video_detail {

int64_t check_frames(const Tensor& frames, const VideoSpec& spec, const std::string& path) {
  if (!frames.defined() || frames.rank() != 4 || frames.dim(0) != 3 ||
      frames.dim(2) != spec.height || frames.dim(3) != spec.width || !is_float(frames.dtype()))
    throw_input_error("video output ", path, ": expected frames as a float tensor [3, n, ",
                      spec.height, ", ", spec.width, "] (channels, frames, height, width), got ",
                      frames.defined() ? frames.describe() : std::string("an empty tensor"));
  return frames.dim(1);
}

}  // namespace video_detail
}  // namespace vidax
