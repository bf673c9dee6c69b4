// MP4 (libx264) and WebM (libvpx-vp9) output through libavformat/libavcodec/libswscale
// (FFmpeg 5.1 API: send_frame / receive_packet, AVCodecParameters, no deprecated calls).
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/dict.h>
#include <libavutil/error.h>
#include <libavutil/log.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
}

#include <unistd.h>

#include <cstdlib>
#include <mutex>

#include "core/error.h"
#include "io/av_logging.h"
#include "io/temp_paths.h"
#include "io/video_writer_internal.h"

namespace vidax::video_detail {
namespace {

std::string av_error_text(int err) {
  char text[AV_ERROR_MAX_STRING_SIZE] = {};
  if (av_strerror(err, text, sizeof(text)) < 0) return str_cat("libav error ", err);
  return text;
}

struct AvDict {
  AVDictionary* dict = nullptr;
  ~AvDict() { av_dict_free(&dict); }
  void set(const char* key, const std::string& value) { av_dict_set(&dict, key, value.c_str(), 0); }
};

class FfmpegVideoWriter final : public VideoWriter {
 public:
  FfmpegVideoWriter(const std::string& path, VideoFormat format, const VideoSpec& spec)
      : path_(path), temp_(temp_path_for(path)), spec_(spec) {
    try {
      setup(format);
    } catch (...) {
      release_all(/*remove_temp=*/true);
      throw;
    }
  }

  ~FfmpegVideoWriter() override { release_all(/*remove_temp=*/state_ != State::kFinished); }

  void write(const Tensor& frames) override {
    VIDAX_CHECK(state_ == State::kOpen, "VideoWriter::write after finish() or a failure");
    const int64_t n = check_frames(frames, spec_, path_);
    try {
      const std::vector<uint8_t> rgb = to_uint8_rgb(frames);  // [n, H, W, 3]
      const size_t frame_bytes = static_cast<size_t>(spec_.width * spec_.height * 3);
      for (int64_t t = 0; t < n; ++t) {
        check(av_frame_make_writable(frame_), "cannot allocate a frame");
        const uint8_t* src[1] = {rgb.data() + static_cast<size_t>(t) * frame_bytes};
        const int src_stride[1] = {static_cast<int>(spec_.width * 3)};
        sws_scale(sws_, src, src_stride, 0, static_cast<int>(spec_.height), frame_->data,
                  frame_->linesize);
        frame_->pts = frames_;
        check(avcodec_send_frame(encoder_, frame_), "cannot encode a frame");
        drain_packets();
        ++frames_;
      }
    } catch (...) {
      fail();
      throw;
    }
  }

  void finish() override {
    VIDAX_CHECK(state_ == State::kOpen, "VideoWriter::finish twice or after a failure");
    try {
      if (frames_ == 0) throw_input_error("video output ", path_, ": no frames were written");
      check(avcodec_send_frame(encoder_, nullptr), "cannot flush the encoder");
      drain_packets();
      check(av_write_trailer(format_), "cannot write the trailer");
      check(avio_closep(&format_->pb), "cannot close the file");
      sync_path(temp_);
      rename_into_place(temp_, path_);
      guard_.release();
      state_ = State::kFinished;
    } catch (...) {
      fail();
      throw;
    }
  }

  int64_t frames_written() const override { return frames_; }
  const std::string& path() const override { return path_; }

 private:
  enum class State { kOpen, kFailed, kFinished };

  void setup(VideoFormat format) {
    configure_av_logging();
    const bool mp4 = format == VideoFormat::kMp4;
    check(avformat_alloc_output_context2(&format_, nullptr, mp4 ? "mp4" : "webm", temp_.c_str()),
          "cannot create the container");

    const char* codec_name = mp4 ? "libx264" : "libvpx-vp9";
    const AVCodec* codec = avcodec_find_encoder_by_name(codec_name);
    if (codec == nullptr)
      throw_input_error("video output ", path_, ": this FFmpeg build has no ", codec_name,
                        " encoder");
    stream_ = avformat_new_stream(format_, nullptr);
    if (stream_ == nullptr) throw std::bad_alloc();
    encoder_ = avcodec_alloc_context3(codec);
    if (encoder_ == nullptr) throw std::bad_alloc();

    const AVRational rate = av_d2q(spec_.fps, 100000);  // 16 -> 16/1, 23.976 -> 2997/125
    encoder_->width = static_cast<int>(spec_.width);
    encoder_->height = static_cast<int>(spec_.height);
    encoder_->pix_fmt = AV_PIX_FMT_YUV420P;
    encoder_->framerate = rate;
    encoder_->time_base = av_inv_q(rate);  // one tick per frame: pts = frame index
    encoder_->sample_aspect_ratio = AVRational{1, 1};
    // What the swscale conversion below produces; written into the bitstream (H.264 VUI, VP9
    // colour config) and the container so players decode the colours as encoded.
    encoder_->color_range = AVCOL_RANGE_MPEG;
    encoder_->colorspace = AVCOL_SPC_BT709;
    encoder_->color_primaries = AVCOL_PRI_BT709;
    encoder_->color_trc = AVCOL_TRC_BT709;
    encoder_->thread_count = 0;  // encoder picks (frames are encoded after the heavy compute)
    if (format_->oformat->flags & AVFMT_GLOBALHEADER)
      encoder_->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;

    AvDict codec_options;
    if (mp4) {
      if (spec_.crf >= 0) codec_options.set("crf", std::to_string(spec_.crf));
    } else {
      // Constant quality (bit_rate 0 + crf); 32 is what FFmpeg itself picks for VP9 without a
      // bitrate. cpu-used 4 + row-mt: several times faster than libvpx's default, see docs.
      encoder_->bit_rate = 0;
      codec_options.set("crf", std::to_string(spec_.crf >= 0 ? spec_.crf : 32));
      codec_options.set("deadline", "good");
      codec_options.set("cpu-used", "4");
      codec_options.set("row-mt", "1");
    }
    check(avcodec_open2(encoder_, codec, &codec_options.dict), "cannot open the encoder");
    check(avcodec_parameters_from_context(stream_->codecpar, encoder_),
          "cannot set the stream parameters");
    stream_->time_base = encoder_->time_base;
    stream_->avg_frame_rate = rate;

    // Registered before the file exists, so there is no moment at which a signal could leave it.
    guard_ = TempPathGuard::file(temp_);
    check(avio_open(&format_->pb, temp_.c_str(), AVIO_FLAG_WRITE), "cannot create the file");
    AvDict muxer_options;
    if (mp4) muxer_options.set("movflags", "+faststart");  // index first: plays while loading
    check(avformat_write_header(format_, &muxer_options.dict), "cannot write the header");

    sws_ = sws_getContext(encoder_->width, encoder_->height, AV_PIX_FMT_RGB24, encoder_->width,
                          encoder_->height, AV_PIX_FMT_YUV420P,
                          SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INP, nullptr, nullptr,
                          nullptr);
    if (sws_ == nullptr)
      throw_input_error("video output ", path_, ": swscale cannot convert RGB to YUV 4:2:0 at ",
                        spec_.width, "x", spec_.height);
    const int* bt709 = sws_getCoefficients(SWS_CS_ITU709);
    // Source full-range RGB; destination BT.709 matrix, limited range (Y 16..235, UV 16..240).
    check(sws_setColorspaceDetails(sws_, bt709, 1, bt709, 0, 0, 1 << 16, 1 << 16),
          "swscale cannot use BT.709 limited range");

    frame_ = av_frame_alloc();
    packet_ = av_packet_alloc();
    if (frame_ == nullptr || packet_ == nullptr) throw std::bad_alloc();
    frame_->format = encoder_->pix_fmt;
    frame_->width = encoder_->width;
    frame_->height = encoder_->height;
    frame_->color_range = encoder_->color_range;
    frame_->colorspace = encoder_->colorspace;
    frame_->color_primaries = encoder_->color_primaries;
    frame_->color_trc = encoder_->color_trc;
    check(av_frame_get_buffer(frame_, 0), "cannot allocate a frame");
  }

  void drain_packets() {
    for (;;) {
      const int rc = avcodec_receive_packet(encoder_, packet_);
      if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return;
      check(rc, "cannot encode a frame");
      av_packet_rescale_ts(packet_, encoder_->time_base, stream_->time_base);
      packet_->stream_index = stream_->index;
      check(av_interleaved_write_frame(format_, packet_), "cannot write a packet");  // unrefs
      // avio keeps a sticky error for failed writes (disk full, file size limit, ...).
      check(format_->pb->error, "cannot write");
    }
  }

  void check(int rc, const char* what) const {
    if (rc < 0) throw_input_error("video output ", path_, ": ", what, ": ", av_error_text(rc));
  }

  void fail() {
    state_ = State::kFailed;
    release_all(/*remove_temp=*/true);
  }

  // Frees every libav object; closes and (optionally) removes the temporary. Safe to call twice.
  void release_all(bool remove_temp) noexcept {
    if (format_ != nullptr && format_->pb != nullptr) avio_closep(&format_->pb);
    if (remove_temp && guard_.active()) ::unlink(temp_.c_str());
    guard_.release();
    sws_freeContext(sws_);
    sws_ = nullptr;
    av_frame_free(&frame_);
    av_packet_free(&packet_);
    avcodec_free_context(&encoder_);
    avformat_free_context(format_);  // also frees stream_
    format_ = nullptr;
    stream_ = nullptr;
  }

  std::string path_;
  std::string temp_;
  VideoSpec spec_;
  TempPathGuard guard_;
  AVFormatContext* format_ = nullptr;
  AVStream* stream_ = nullptr;  // owned by format_
  AVCodecContext* encoder_ = nullptr;
  SwsContext* sws_ = nullptr;
  AVFrame* frame_ = nullptr;
  AVPacket* packet_ = nullptr;
  int64_t frames_ = 0;
  State state_ = State::kOpen;
};

}  // namespace

std::unique_ptr<VideoWriter> open_ffmpeg_writer(const std::string& path, VideoFormat format,
                                                const VideoSpec& spec) {
  return std::make_unique<FfmpegVideoWriter>(path, format, spec);
}

}  // namespace vidax::video_detail
