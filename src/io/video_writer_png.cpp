// Folder of PNG frames (frame_00000.png, ...), built in "<folder>.tmp.<pid>/" and renamed into
// place by finish().
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>

#include "core/error.h"
#include "io/png.h"
#include "io/temp_paths.h"
#include "io/video_writer_internal.h"

namespace vidax::video_detail {
namespace {

constexpr const char* kPrefix = "frame_";
constexpr const char* kSuffix = ".png";
constexpr int kDigits = 5;
// zlib level for frames: on an 832x480 synthetic frame level 6 (the encode_png default) took 2.8x
// as long as level 3 for a 23% smaller file, level 1 half as long for a 12% larger one.
constexpr int kFrameLevel = 3;

std::string frame_name(int64_t index) {
  char name[48];
  std::snprintf(name, sizeof(name), "%s%0*lld%s", kPrefix, kDigits, static_cast<long long>(index),
                kSuffix);
  return name;
}

class PngFolderWriter final : public VideoWriter {
 public:
  PngFolderWriter(const std::string& path, const VideoSpec& spec) : spec_(spec) {
    target_ = path;
    while (target_.size() > 1 && target_.back() == '/') target_.pop_back();
    path_ = target_ + "/";
    temp_ = temp_path_for(target_);

    std::error_code ec;
    const auto status = std::filesystem::status(target_, ec);
    if (std::filesystem::exists(status)) {
      if (!std::filesystem::is_directory(status))
        throw_input_error("video output ", path_, ": exists and is not a folder");
      if (!std::filesystem::is_empty(target_, ec) || ec)
        throw_input_error("video output ", path_,
                          ": folder exists and is not empty; remove it or choose another path");
    }
    guard_ = TempPathGuard::numbered_folder(temp_, kPrefix, kSuffix, kDigits);
    if (::mkdir(temp_.c_str(), 0755) != 0) {
      const int err = errno;
      guard_.release();
      throw_input_error("video output ", path_, ": cannot create the temporary folder ", temp_,
                        ": ", std::strerror(err));
    }
  }

  ~PngFolderWriter() override {
    if (state_ != State::kFinished) remove_temp();
  }

  void write(const Tensor& frames) override {
    VIDAX_CHECK(state_ == State::kOpen, "VideoWriter::write after finish() or a failure");
    const int64_t n = check_frames(frames, spec_, path_);
    try {
      const std::vector<uint8_t> rgb = to_uint8_rgb(frames);  // [n, H, W, 3]
      const size_t frame_bytes = static_cast<size_t>(spec_.width * spec_.height * 3);
      // The VAE hands over up to 4 frames at a time: compress them in parallel, write in order.
      std::vector<std::vector<uint8_t>> pngs(static_cast<size_t>(n));
      std::exception_ptr error;
#pragma omp parallel for schedule(dynamic, 1)
      for (int64_t t = 0; t < n; ++t) {
        try {
          pngs[static_cast<size_t>(t)] =
              encode_png(std::span<const uint8_t>(rgb.data() + static_cast<size_t>(t) * frame_bytes,
                                                  frame_bytes),
                         spec_.width, spec_.height, kFrameLevel);
        } catch (...) {
#pragma omp critical(vidax_png_folder_error)
          error = std::current_exception();
        }
      }
      if (error) std::rethrow_exception(error);
      for (int64_t t = 0; t < n; ++t) {
        guard_.set_file_count(frames_ + 1);  // before the file exists: see temp_paths.h
        try {
          write_whole_file(temp_ + "/" + frame_name(frames_), pngs[static_cast<size_t>(t)],
                           /*sync=*/true);
        } catch (const InputError& e) {
          throw_input_error("video output ", path_, ": ", e.what());
        }
        ++frames_;
      }
    } catch (...) {
      state_ = State::kFailed;
      remove_temp();
      throw;
    }
  }

  void finish() override {
    VIDAX_CHECK(state_ == State::kOpen, "VideoWriter::finish twice or after a failure");
    try {
      if (frames_ == 0) throw_input_error("video output ", path_, ": no frames were written");
      sync_path(temp_);
      rename_into_place(temp_, target_);
      guard_.release();
      state_ = State::kFinished;
    } catch (...) {
      state_ = State::kFailed;
      remove_temp();
      throw;
    }
  }

  int64_t frames_written() const override { return frames_; }
  const std::string& path() const override { return path_; }

 private:
  enum class State { kOpen, kFailed, kFinished };

  void remove_temp() noexcept {
    if (!guard_.active()) return;
    std::error_code ec;
    std::filesystem::remove_all(temp_, ec);  // our own folder: only frames we wrote
    guard_.release();
  }

  VideoSpec spec_;
  std::string target_;  // without the trailing '/'
  std::string path_;    // target_ + "/"
  std::string temp_;
  TempPathGuard guard_;
  int64_t frames_ = 0;
  State state_ = State::kOpen;
};

}  // namespace

std::unique_ptr<VideoWriter> open_png_folder_writer(const std::string& path,
                                                    const VideoSpec& spec) {
  return std::make_unique<PngFolderWriter>(path, spec);
}

}  // namespace vidax::video_detail
