// Helpers for the video-output tests (see video_test_util.h).
#include "io/video_test_util.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/pixdesc.h>
}

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

namespace vidax::testing {

Tensor smooth_frames(int64_t n, int64_t h, int64_t w, int64_t first_frame) {
  Tensor out = Tensor::zeros({3, n, h, w});
  float* p = out.mutable_data<float>();  // [3, n, h, w]
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t t = 0; t < n; ++t)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) {
          const double f = static_cast<double>(first_frame + t);
          const double u = static_cast<double>(x) / static_cast<double>(w);
          const double v = static_cast<double>(y) / static_cast<double>(h);
          const double value = std::sin(2.0 * u + 1.5 * v * (1.0 + 0.3 * static_cast<double>(c)) +
                                        0.25 * f + 2.1 * static_cast<double>(c));
          p[((c * n + t) * h + y) * w + x] = static_cast<float>(0.95 * value);
        }
  return out;
}

Tensor noise_frames(int64_t n, int64_t h, int64_t w, uint32_t seed) {
  Tensor out = Tensor::zeros({3, n, h, w});
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  float* p = out.mutable_data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) p[i] = dist(gen);
  return out;
}

bool have_ffprobe() { return std::system("ffprobe -version >/dev/null 2>&1") == 0; }

std::map<std::string, std::string> ffprobe_video(const std::string& path) {
  const std::string command =
      "ffprobe -v error -count_frames -select_streams v:0 -show_entries "
      "stream=codec_name,pix_fmt,width,height,nb_read_frames,r_frame_rate,avg_frame_rate,"
      "color_space,color_range,color_primaries,color_transfer "
      "-of default=noprint_wrappers=1 '" +
      path + "' 2>&1";
  std::map<std::string, std::string> out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char line[512];
  while (std::fgets(line, sizeof(line), pipe) != nullptr) {
    std::string s(line);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    const size_t eq = s.find('=');
    if (eq == std::string::npos) {
      out["error"] += s;
      continue;
    }
    out[s.substr(0, eq)] = s.substr(eq + 1);
  }
  if (::pclose(pipe) != 0) out["error"] += " (ffprobe failed)";
  return out;
}

namespace {

DecodedFrame copy_frame(const AVFrame* frame) {
  DecodedFrame out;
  out.format = frame->format;
  out.width = frame->width;
  out.height = frame->height;
  const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(static_cast<AVPixelFormat>(frame->format));
  const int planes = av_pix_fmt_count_planes(static_cast<AVPixelFormat>(frame->format));
  for (int i = 0; i < planes; ++i) {
    const bool chroma = i == 1 || i == 2;
    const int64_t ph = chroma ? -((-frame->height) >> desc->log2_chroma_h) : frame->height;
    int64_t row_bytes = 0;
    if (desc->flags & AV_PIX_FMT_FLAG_PLANAR) {
      row_bytes = chroma ? -((-frame->width) >> desc->log2_chroma_w) : frame->width;
    } else {
      row_bytes = static_cast<int64_t>(frame->width) * av_get_bits_per_pixel(desc) / 8;
    }
    std::vector<uint8_t> plane(static_cast<size_t>(row_bytes * ph));
    for (int64_t y = 0; y < ph; ++y)
      std::copy_n(frame->data[i] + y * frame->linesize[i], row_bytes, plane.data() + y * row_bytes);
    out.planes.push_back(std::move(plane));
  }
  return out;
}

}  // namespace

std::vector<DecodedFrame> decode_video(const std::string& path) {
  std::vector<DecodedFrame> out;
  AVFormatContext* format = nullptr;
  if (avformat_open_input(&format, path.c_str(), nullptr, nullptr) < 0) {
    ADD_FAILURE() << "libav cannot open " << path;
    return out;
  }
  const AVCodec* codec = nullptr;
  AVCodecContext* decoder = nullptr;
  AVPacket* packet = av_packet_alloc();
  AVFrame* frame = av_frame_alloc();
  int stream = -1;
  auto receive_all = [&] {
    while (avcodec_receive_frame(decoder, frame) >= 0) {
      out.push_back(copy_frame(frame));
      av_frame_unref(frame);
    }
  };
  if (avformat_find_stream_info(format, nullptr) >= 0 &&
      (stream = av_find_best_stream(format, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0)) >= 0 &&
      (decoder = avcodec_alloc_context3(codec)) != nullptr &&
      avcodec_parameters_to_context(decoder, format->streams[stream]->codecpar) >= 0 &&
      avcodec_open2(decoder, codec, nullptr) >= 0) {
    while (av_read_frame(format, packet) >= 0) {
      if (packet->stream_index == stream && avcodec_send_packet(decoder, packet) >= 0)
        receive_all();
      av_packet_unref(packet);
    }
    avcodec_send_packet(decoder, nullptr);
    receive_all();
  } else {
    ADD_FAILURE() << "libav cannot set up a decoder for " << path;
  }
  av_frame_free(&frame);
  av_packet_free(&packet);
  avcodec_free_context(&decoder);
  avformat_close_input(&format);
  return out;
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

pid_t spawn_child(const std::string& mode, const std::string& arg, const std::string& log_path) {
  // Everything the child needs is built before fork(): between fork and exec only
  // async-signal-safe calls are allowed in a process that may have threads.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  env_strings.push_back("VIDAX_VIDEO_CHILD=" + mode);
  env_strings.push_back("VIDAX_VIDEO_CHILD_ARG=" + arg);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe", name = "test_io",
              filter = "--gtest_filter=VideoWriterChild.DISABLED_Helper",
              disabled = "--gtest_also_run_disabled_tests";
  char* argv[] = {name.data(), filter.data(), disabled.data(), nullptr};
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (log_fd >= 0) {
      ::dup2(log_fd, STDOUT_FILENO);
      ::dup2(log_fd, STDERR_FILENO);
    }
    ::execve(exe.c_str(), argv, envp.data());
    ::_exit(127);
  }
  if (log_fd >= 0) ::close(log_fd);
  return pid;
}

int wait_child(pid_t pid, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0) {
      ADD_FAILURE() << "waitpid failed";
      return -1;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << "child " << pid << " did not finish within " << timeout_s << " s";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace vidax::testing
