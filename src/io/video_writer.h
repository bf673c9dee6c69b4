// Video output: MP4 (H.264), WebM (VP9) through FFmpeg's libraries, or a folder of PNG frames.
//
// Frames arrive as the VAE decodes them ([3, n, H, W] float in [-1, 1], any n per call), are
// converted to 8-bit RGB exactly as the official Wan `cache_video` does (see to_uint8_rgb), and
// for MP4/WebM converted to YUV 4:2:0 with BT.709 coefficients, limited ("TV") range, and tagged
// as such in the stream. Everything is written under a temporary name next to the target
// ("<path>.tmp.<pid>", registered with io/temp_paths.h so a SIGINT/SIGTERM removes it once
// install_temp_cleanup_handlers() is in effect) and renamed into place by finish(); a writer
// destroyed without finish() removes its temporary, so `path` only ever holds a complete video.
// docs/video-output.md has the details.
//
// Thread safety: one writer must be used by one thread at a time; separate writers are
// independent. write() parallelises the uint8 conversion with OpenMP; the encoders may run their
// own threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace vidax {

// x264 crf of the official Wan MP4s: imageio's quality=8 becomes -crf int((1 - 0.8) * 51) = 10.
constexpr int kWanOfficialMp4Crf = 10;

struct VideoSpec {
  int64_t width = 0, height = 0;
  double fps = 16;  // Wan 2.1 sample_fps; Wan 2.2 TI2V uses 24
  int crf = -1;     // quality (lower is better); -1: codec default (x264: 23, VP9: 32)
};

enum class VideoFormat { kMp4, kWebm, kPngFolder };

// Format chosen by `path`: ".mp4" (any case) → kMp4, ".webm" → kWebm, a path ending in '/' or
// whose last component has no extension → kPngFolder. Anything else → InputError naming the path
// and the accepted forms.
VideoFormat video_format_for_path(const std::string& path);

// [3, n, H, W] float frames (F32; BF16/F16 are widened) → n*H*W*3 bytes, frame-major, each
// frame [H, W, 3] RGB. The official rule (wan/utils/utils.py cache_video → torchvision
// make_grid(normalize=True, value_range=(-1, 1)) → (x * 255).type(torch.uint8)), in float32:
//   v = clamp(x, -1, 1);  v = (v + 1) / 2;  byte = truncate(v * 255)
// so -1 → 0, 1 → 255, and a byte value k needs v*255 >= k (truncation, not rounding).
// NaN (where torch's float→uint8 cast is undefined) → 0; ±inf clamp to ±1.
std::vector<uint8_t> to_uint8_rgb(const Tensor& frames);

class VideoWriter {
 public:
  // Validates the spec and path, creates the temporary and (MP4/WebM) sets up the encoder.
  // InputError on a bad spec (non-positive or, for MP4/WebM, odd width/height; fps not in
  // (0, 1000]; crf out of the codec's range), an unsupported path, a folder target that exists
  // and is not empty, or any file/libav failure (the message names the path and libav's text).
  static std::unique_ptr<VideoWriter> open(const std::string& path, const VideoSpec& spec);

  virtual ~VideoWriter() = default;  // without finish(): the temporary is removed

  // frames: [3, n, H, W] float in [-1, 1] with H, W = spec height, width; n >= 0. Streams: call as
  // often as needed. InputError on a wrong shape/dtype or a write failure; after a failure the
  // writer only accepts destruction.
  virtual void write(const Tensor& frames) = 0;
  // Flushes the encoder, writes the trailer, fsyncs, renames the temporary into place.
  // Requires at least one frame. InputError on failure (the temporary is then removed).
  virtual void finish() = 0;
  virtual int64_t frames_written() const = 0;
  virtual const std::string& path() const = 0;
};

}  // namespace vidax
