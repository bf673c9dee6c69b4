#include "models/wan/vae_schedule.h"

#include <string>

#include "core/error.h"
#include "models/wan/vae_tensors.h"

namespace vidax::wan {
namespace {

using dist::OpClass;
using dist::ScheduledOp;

// Builds one level's segment: ops are per frame, `calls` frames each.
class Level {
 public:
  Level(std::string name, int64_t frames, int64_t pixels, double item)
      : frames_(frames), px_(static_cast<double>(pixels)), item_(item) {
    seg_.name = std::move(name);
  }
  // A conv of kernel volume `taps` from `cin` to `cout` channels over `out_frames` frames of
  // `out_px` output pixels each.
  void conv(const std::string& name, int64_t taps, int64_t cin, int64_t cout, int64_t out_frames,
            double out_px) {
    if (out_frames <= 0) return;
    // The 1x1 convs run as GEMMs (PackedLinear); the others through the convolution primitive.
    ScheduledOp op{name, taps > 1 ? OpClass::kConv : OpClass::kGemm};
    op.flops = 2.0 * static_cast<double>(taps * cin * cout) * out_px;
    op.calls = out_frames;
    seg_.ops.push_back(op);
  }
  // Bytes read and written per element of `channels` channels over the level's frames.
  void memory(const std::string& name, double bytes_per_element, int64_t channels,
              int64_t frames = -1, double px = -1) {
    if (frames < 0) frames = frames_;
    if (px < 0) px = px_;
    if (frames <= 0) return;
    ScheduledOp op{name, OpClass::kMemory};
    op.bytes = bytes_per_element * static_cast<double>(channels) * px;
    op.calls = frames;
    seg_.ops.push_back(op);
  }
  // The residual block: RMS norm + SiLU into the conv dtype, causal 3x3x3 conv; again; the 1x1
  // shortcut where the width changes (conv2 accumulates into the residual).
  void res_block(int64_t in, int64_t out) {
    memory("norm1", 4.0 + item_, in);
    conv("conv1", 27, in, out, frames_, px_);
    if (in != out) conv("shortcut", 1, in, out, frames_, px_);
    memory("norm2", 4.0 + item_, out);
    conv("conv2", 27, out, out, frames_, px_);
  }
  // The middle block's attention, per frame over its pixels, one head of `c` channels: norm,
  // q|k|v (1x1), softmax(q k^T) v, projection, residual add.
  void attention(int64_t c) {
    memory("attention.norm", 8.0, c);
    conv("attention.qkv", 1, c, 3 * c, frames_, px_);
    ScheduledOp op{"attention", OpClass::kAttention};
    op.flops = 4.0 * px_ * px_ * static_cast<double>(c);
    op.calls = frames_;
    seg_.ops.push_back(op);
    conv("attention.proj", 1, c, c, frames_, px_);
    memory("attention.residual", 12.0, c);
  }
  // The middle block: residual block, attention, residual block, all `c` channels wide.
  void middle(int64_t c) {
    res_block(c, c);
    attention(c);
    res_block(c, c);
  }
  // An input or head conv (causal 3x3x3) behind what makes its input: a dtype conversion or a
  // norm (+ SiLU), `cin` -> `cout` over the level's frames.
  void staged_conv(const std::string& staging, int64_t cin, int64_t cout) {
    memory(staging, 4.0 + item_, cin);
    conv("conv", 27, cin, cout, frames_, px_);
  }
  int64_t frames() const { return frames_; }
  double pixels() const { return px_; }
  double item() const { return item_; }
  dist::ScheduleSegment take() { return std::move(seg_); }

 private:
  int64_t frames_;
  double px_, item_;
  dist::ScheduleSegment seg_;
};

void check_size(const VaeConfig& c, int64_t frames, int64_t height, int64_t width) {
  const int64_t ts = c.temporal_stride(), ss = c.spatial_stride();
  if (frames < 1 || (frames - 1) % ts != 0)
    throw_input_error("VAE: ", frames, " frames; the Wan ", c.version_name(), " VAE needs ", ts,
                      "k+1");
  if (height <= 0 || width <= 0 || height % ss != 0 || width % ss != 0)
    throw_input_error("VAE: ", width, "x", height, " is not a positive multiple of the Wan ",
                      c.version_name(), " VAE's spatial stride ", ss);
}

}  // namespace

dist::Schedule vae_decode_schedule(const VaeConfig& c, int64_t frames, int64_t height,
                                   int64_t width, Precision precision) {
  check_size(c, frames, height, width);
  const VaeArchitecture a = vae_architecture(c);
  const double item = precision == Precision::kBF16 ? 2.0 : 4.0;
  const int64_t ss = c.spatial_stride();
  int64_t nf = 1 + (frames - 1) / c.temporal_stride();  // latent frames
  int64_t px = (height / ss) * (width / ss);
  dist::Schedule s;
  {
    Level l("decoder.conv_in", nf, px, item);
    l.staged_conv("convert", c.z_dim, a.dec_top);
    s.segments.push_back(l.take());
  }
  {
    Level l("decoder.middle", nf, px, item);
    l.middle(a.dec_top);
    s.segments.push_back(l.take());
  }
  for (size_t i = 0; i < a.decoder.size(); ++i) {
    const VaeStageDesc& st = a.decoder[i];
    Level l("decoder.stage" + std::to_string(i), nf, px, item);
    for (const auto& r : st.res) l.res_block(r.in, r.out);
    const VaeResampleDesc& rs = st.resample;
    int64_t out_frames = nf;
    if (rs.mode == VaeResampleMode::kUp3d) {
      // (3,1,1) conv to 2C channels on every latent frame but the first, interleaved into frames.
      l.memory("time_conv.convert", 4.0 + item, rs.dim, nf - 1);
      l.conv("time_conv", 3, rs.dim, 2 * rs.dim, nf - 1, static_cast<double>(px));
      l.memory("time_conv.interleave", 8.0, 2 * rs.dim, nf - 1);
      out_frames = 1 + 2 * (nf - 1);
    }
    if (rs.mode == VaeResampleMode::kUp2d || rs.mode == VaeResampleMode::kUp3d) {
      // Converted, upsampled 2x nearest (4 writes per element), then a 3x3 conv per frame.
      l.memory("upsample", 4.0 + 5.0 * item, rs.dim, out_frames);
      l.conv("resample", 9, rs.dim, rs.out_dim, out_frames, 4.0 * static_cast<double>(px));
      if (st.shortcut_s > 0)  // Wan 2.2 DupUp3D: the stage's input duplicated, added to its output
        l.memory("shortcut", 12.0, st.out, out_frames, 4.0 * static_cast<double>(px));
      px *= 4;
    }
    nf = out_frames;
    s.segments.push_back(l.take());
  }
  {
    Level l("decoder.head", nf, px, item);
    l.staged_conv("norm", a.dec_out, c.io_channels());
    s.segments.push_back(l.take());
  }
  return s;
}

dist::Schedule vae_encode_schedule(const VaeConfig& c, int64_t frames, int64_t height,
                                   int64_t width, Precision precision) {
  check_size(c, frames, height, width);
  const VaeArchitecture a = vae_architecture(c);
  const double item = precision == Precision::kBF16 ? 2.0 : 4.0;
  const int64_t p = c.patch();
  int64_t nf = frames;
  int64_t px = (height / p) * (width / p);
  dist::Schedule s;
  {
    Level l("encoder.conv_in", nf, px, item);
    l.staged_conv("convert", c.io_channels(), c.dim);
    s.segments.push_back(l.take());
  }
  for (size_t i = 0; i < a.encoder.size(); ++i) {
    const VaeStageDesc& st = a.encoder[i];
    Level l("encoder.stage" + std::to_string(i), nf, px, item);
    for (const auto& r : st.res) l.res_block(r.in, r.out);
    const VaeResampleDesc& rs = st.resample;
    if (rs.mode == VaeResampleMode::kDown2d || rs.mode == VaeResampleMode::kDown3d) {
      // A 3x3 stride-2 conv per frame; then (3d) a (3,1,1) stride-2 conv in time on every chunk
      // but the first (2 frames from 2 new + 1 carried).
      const double out_px = static_cast<double>((px / 4));
      l.memory("downsample.convert", 4.0 + item, rs.dim);
      l.conv("resample", 9, rs.dim, rs.dim, nf, out_px);
      int64_t out_frames = nf;
      if (rs.mode == VaeResampleMode::kDown3d) {
        out_frames = 1 + (nf - 1) / 2;
        l.memory("time_conv.convert", 4.0 + item, rs.dim, nf, out_px);
        l.conv("time_conv", 3, rs.dim, rs.dim, out_frames - 1, out_px);
      }
      if (st.shortcut_s > 0)  // Wan 2.2 AvgDown3D: the stage's input averaged, added to its output
        l.memory("shortcut", 12.0, st.out, out_frames, out_px);
      nf = out_frames;
      px /= 4;
    }
    s.segments.push_back(l.take());
  }
  {
    Level l("encoder.middle", nf, px, item);
    l.middle(a.enc_top);
    s.segments.push_back(l.take());
  }
  {
    Level l("encoder.head", nf, px, item);
    l.staged_conv("norm", a.enc_top, 2 * c.z_dim);
    s.segments.push_back(l.take());
  }
  return s;
}

}  // namespace vidax::wan
