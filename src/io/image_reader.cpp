#include "io/image_reader.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavutil/imgutils.h>
#include <libavutil/pixdesc.h>
#include <webp/decode.h>
}
#include <jpeglib.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>

#include "core/error.h"
#include "io/av_logging.h"

namespace vidax {
namespace {

void check_size(int64_t width, int64_t height, const std::string& name) {
  if (width <= 0 || height <= 0 || width > 65535 || height > 65535 ||
      width * height > kMaxImagePixels)
    throw_input_error(name, ": image size ", width, "x", height,
                      " is not supported (each side 1..65535, at most ", kMaxImagePixels,
                      " pixels)");
}

// ---- JPEG (libjpeg-turbo) ----

struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void jpeg_silent(j_common_ptr, int) {}

RgbImage decode_jpeg(std::span<const uint8_t> bytes, const std::string& name) {
  RgbImage img;
  jpeg_decompress_struct cinfo{};
  JpegError err{};
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit;
  err.mgr.emit_message = jpeg_silent;
  // Only C state lives between setjmp and longjmp; the vector is sized after the header.
  if (setjmp(err.jump) != 0) {
    jpeg_destroy_decompress(&cinfo);
    throw_input_error(name, ": invalid or truncated JPEG: ", err.message);
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    jpeg_destroy_decompress(&cinfo);
    throw_input_error(name, ": CMYK JPEG images are not supported; save it as RGB");
  }
  cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&cinfo);
  const int64_t w = cinfo.output_width, h = cinfo.output_height;
  if (w <= 0 || h <= 0 || w > 65535 || h > 65535 || w * h > kMaxImagePixels ||
      cinfo.output_components != 3) {
    jpeg_destroy_decompress(&cinfo);
    check_size(w, h, name);
    throw_input_error(name, ": JPEG decodes to ", cinfo.output_components,
                      " components, expected 3");
  }
  img.width = w;
  img.height = h;
  img.rgb.resize(static_cast<size_t>(w * h * 3));
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = img.rgb.data() + static_cast<size_t>(cinfo.output_scanline) * w * 3;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  // A file cut short decodes with grey rows and a warning; refuse it rather than condition a
  // video on half an image.
  const long warnings = err.mgr.num_warnings;
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  if (warnings > 0)
    throw_input_error(name, ": the JPEG data is corrupt or truncated (", warnings,
                      " decoder warning(s))");
  return img;
}

// ---- WebP (libwebp) ----

RgbImage decode_webp(std::span<const uint8_t> bytes, const std::string& name) {
  WebPBitstreamFeatures features;
  if (WebPGetFeatures(bytes.data(), bytes.size(), &features) != VP8_STATUS_OK)
    throw_input_error(name, ": invalid or truncated WebP");
  if (features.has_animation)
    throw_input_error(name, ": animated WebP images are not supported; give one frame");
  check_size(features.width, features.height, name);
  int w = 0, h = 0;
  uint8_t* data = WebPDecodeRGB(bytes.data(), bytes.size(), &w, &h);
  if (data == nullptr) throw_input_error(name, ": invalid or truncated WebP");
  RgbImage img;
  img.width = w;
  img.height = h;
  img.rgb.assign(data, data + static_cast<size_t>(w) * static_cast<size_t>(h) * 3);
  WebPFree(data);
  return img;
}

// ---- PNG (FFmpeg's decoder) ----

struct CodecContextFree {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct FrameFree {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct PacketFree {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};

std::string av_error(int code) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(code, buf, sizeof buf);
  return buf;
}

RgbImage decode_png(std::span<const uint8_t> bytes, const std::string& name) {
  configure_av_logging();  // FFmpeg's own warnings ("chunk too big") stay off stderr
  const AVCodec* codec = avcodec_find_decoder(AV_CODEC_ID_PNG);
  if (codec == nullptr) throw_input_error(name, ": this FFmpeg build has no PNG decoder");
  std::unique_ptr<AVCodecContext, CodecContextFree> ctx(avcodec_alloc_context3(codec));
  std::unique_ptr<AVFrame, FrameFree> frame(av_frame_alloc());
  std::unique_ptr<AVPacket, PacketFree> pkt(av_packet_alloc());
  if (!ctx || !frame || !pkt) throw_input_error(name, ": out of memory decoding the PNG");
  ctx->thread_count = 1;
  if (avcodec_open2(ctx.get(), codec, nullptr) < 0)
    throw_input_error(name, ": cannot open FFmpeg's PNG decoder");
  // The decoder reads past the end in its bitstream reader: a padded copy.
  std::vector<uint8_t> padded(bytes.size() + AV_INPUT_BUFFER_PADDING_SIZE, 0);
  std::memcpy(padded.data(), bytes.data(), bytes.size());
  pkt->data = padded.data();
  pkt->size = static_cast<int>(bytes.size());
  int rc = avcodec_send_packet(ctx.get(), pkt.get());
  if (rc >= 0) rc = avcodec_receive_frame(ctx.get(), frame.get());
  if (rc == AVERROR(EAGAIN)) {  // flush
    avcodec_send_packet(ctx.get(), nullptr);
    rc = avcodec_receive_frame(ctx.get(), frame.get());
  }
  if (rc < 0) throw_input_error(name, ": invalid or truncated PNG (", av_error(rc), ")");
  if (frame->decode_error_flags != 0 || (frame->flags & AV_FRAME_FLAG_CORRUPT) != 0)
    throw_input_error(name, ": the PNG data is corrupt or truncated");
  const int64_t w = frame->width, h = frame->height;
  check_size(w, h, name);
  RgbImage img;
  img.width = w;
  img.height = h;
  img.rgb.resize(static_cast<size_t>(w * h * 3));
  const auto fmt = static_cast<AVPixelFormat>(frame->format);
  for (int64_t y = 0; y < h; ++y) {
    const uint8_t* row = frame->data[0] + y * frame->linesize[0];
    uint8_t* out = img.rgb.data() + y * w * 3;
    for (int64_t x = 0; x < w; ++x) {
      uint8_t r, g, b;
      switch (fmt) {
        case AV_PIX_FMT_RGB24:
          r = row[x * 3], g = row[x * 3 + 1], b = row[x * 3 + 2];
          break;
        case AV_PIX_FMT_RGBA:
          r = row[x * 4], g = row[x * 4 + 1], b = row[x * 4 + 2];
          break;
        case AV_PIX_FMT_RGB48BE:
          r = row[x * 6], g = row[x * 6 + 2], b = row[x * 6 + 4];
          break;
        case AV_PIX_FMT_RGBA64BE:
          r = row[x * 8], g = row[x * 8 + 2], b = row[x * 8 + 4];
          break;
        case AV_PIX_FMT_GRAY8:
          r = g = b = row[x];
          break;
        case AV_PIX_FMT_YA8:       // grey then alpha, 8 bits each
        case AV_PIX_FMT_GRAY16BE:  // the high byte first
          r = g = b = row[x * 2];
          break;
        case AV_PIX_FMT_YA16BE:
          r = g = b = row[x * 4];
          break;
        case AV_PIX_FMT_MONOBLACK: {
          const bool on = (row[x / 8] >> (7 - x % 8)) & 1;
          r = g = b = on ? 255 : 0;
          break;
        }
        case AV_PIX_FMT_PAL8: {
          uint32_t argb;
          std::memcpy(&argb, frame->data[1] + 4 * row[x], 4);
          r = static_cast<uint8_t>(argb >> 16), g = static_cast<uint8_t>(argb >> 8),
          b = static_cast<uint8_t>(argb);
          break;
        }
        default: {
          const char* n = av_get_pix_fmt_name(fmt);
          throw_input_error(name, ": PNG pixel format ", n ? n : "?", " is not supported");
        }
      }
      out[x * 3] = r;
      out[x * 3 + 1] = g;
      out[x * 3 + 2] = b;
    }
  }
  return img;
}

bool starts_with(std::span<const uint8_t> b, const char* magic, size_t n, size_t at = 0) {
  return b.size() >= at + n && std::memcmp(b.data() + at, magic, n) == 0;
}

}  // namespace

RgbImage decode_image(std::span<const uint8_t> bytes, const std::string& name) {
  if (bytes.empty()) throw_input_error(name, ": the file is empty");
  if (starts_with(bytes, "\x89PNG\r\n\x1a\n", 8)) return decode_png(bytes, name);
  if (starts_with(bytes, "\xff\xd8\xff", 3)) return decode_jpeg(bytes, name);
  if (starts_with(bytes, "RIFF", 4) && starts_with(bytes, "WEBP", 4, 8))
    return decode_webp(bytes, name);
  throw_input_error(name, ": not a PNG, JPEG or WebP image (unrecognised file signature)");
}

RgbImage read_image(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) throw_input_error(path, ": cannot open the image (", std::strerror(errno), ")");
  const std::streamoff size = f.tellg();
  if (size < 0) throw_input_error(path, ": cannot read the image");
  if (size > kMaxImageFileBytes)
    throw_input_error(path, ": the image file is larger than ", kMaxImageFileBytes, " bytes");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  f.seekg(0);
  if (!f.read(reinterpret_cast<char*>(bytes.data()), size))
    throw_input_error(path, ": cannot read the image");
  return decode_image(bytes, path);
}

}  // namespace vidax
