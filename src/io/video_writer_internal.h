// Internal to the video writers: the per-format factories behind VideoWriter::open and the
// checks they share. Not part of the public API.
#pragma once

#include <memory>
#include <string>

#include "io/video_writer.h"

namespace vidax::video_detail {

// `path` already validated by video_format_for_path, `spec` by VideoWriter::open.
std::unique_ptr<VideoWriter> open_ffmpeg_writer(const std::string& path, VideoFormat format,
                                                const VideoSpec& spec);
std::unique_ptr<VideoWriter> open_png_folder_writer(const std::string& path, const VideoSpec& spec);

// InputError unless `frames` is a float [3, n, spec.height, spec.width] tensor; returns n.
int64_t check_frames(const Tensor& frames, const VideoSpec& spec, const std::string& path);

}  // namespace vidax::video_detail
