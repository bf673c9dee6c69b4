// Helpers for the video-output tests: synthetic frames, ffprobe, an independent libav decoder,
// folder listings, and a child process that re-runs this test binary in a helper mode (used for
// the signal and file-size-limit tests, which need a process to die or to be limited).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace vidax::testing {

// [3, n, h, w] F32 in [-0.95, 0.95]: smooth colour gradients drifting with the frame index
// (first_frame + t), so chunks of one clip continue each other. Compresses well, like real video.
Tensor smooth_frames(int64_t n, int64_t h, int64_t w, int64_t first_frame = 0);
// [3, n, h, w] F32 uniform in [-1, 1]: incompressible.
Tensor noise_frames(int64_t n, int64_t h, int64_t w, uint32_t seed);

// ffprobe -count_frames on the first video stream: key=value pairs (codec_name, pix_fmt, width,
// height, nb_read_frames, r_frame_rate, color_space, ...). Empty map when ffprobe failed.
std::map<std::string, std::string> ffprobe_video(const std::string& path);
bool have_ffprobe();

// One decoded picture, planes tightly packed (row stride = plane width in bytes).
struct DecodedFrame {
  int format = -1;  // AVPixelFormat
  int64_t width = 0, height = 0;
  std::vector<std::vector<uint8_t>> planes;
};
// Decodes every frame of the first video stream with libavformat/libavcodec (no swscale). Adds a
// gtest failure and returns what it has on any libav error.
std::vector<DecodedFrame> decode_video(const std::string& path);

std::vector<std::string> list_dir(const std::string& dir);  // sorted names, empty if missing

// Runs this test binary again, as VideoWriterChild.DISABLED_Helper with VIDAX_VIDEO_CHILD=mode
// and VIDAX_VIDEO_CHILD_ARG=arg; its stdout/stderr go to `log_path`.
pid_t spawn_child(const std::string& mode, const std::string& arg, const std::string& log_path);
// waitpid with a deadline; kills the child (SIGKILL) and fails the test when it is exceeded.
int wait_child(pid_t pid, double timeout_s);

}  // namespace vidax::testing
