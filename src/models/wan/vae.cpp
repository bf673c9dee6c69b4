#include "models/wan/vae.h"

#include <cmath>
#include <cstring>

#include "core/convert.h"
#include "core/page_buffer.h"
#include "models/wan/vae_impl.h"
#include "nn/video_ops.h"

namespace vidax::wan {
namespace {

std::vector<float> vec(const WeightFn& w, const std::string& name) {
  return w(name).to_float_vector();
}

// [O, I, 1, 1(, 1)] conv weight -> a linear layer over channels (f32).
PackedLinear pointwise(const WeightFn& w, const std::string& name) {
  const Tensor k = w(name + ".weight").contiguous();
  return PackedLinear(k.reshape(Shape{k.dim(0), k.numel() / k.dim(0)}), w(name + ".bias"),
                      DType::kF32);
}

CausalConv causal(const WeightFn& w, const std::string& name, DType compute) {
  Conv3dParams p;
  const Tensor k = w(name + ".weight");
  p.pad_top = p.pad_bottom = k.dim(3) / 2;
  p.pad_left = p.pad_right = k.dim(4) / 2;
  return CausalConv(k, w(name + ".bias"), p, compute);
}

VaeResBlock res_block(const WeightFn& w, const VaeResBlockDesc& d, DType compute) {
  VaeResBlock r;
  r.in = d.in, r.out = d.out, r.compute = compute;
  r.gamma1 = vec(w, d.prefix + "residual.0.gamma");
  r.gamma2 = vec(w, d.prefix + "residual.3.gamma");
  r.conv1 = causal(w, d.prefix + "residual.2", compute);
  r.conv2 = causal(w, d.prefix + "residual.6", compute);
  if (d.has_shortcut()) r.shortcut = pointwise(w, d.prefix + "shortcut");
  return r;
}

VaeResample resample(const WeightFn& w, const VaeResampleDesc& d, DType compute) {
  VaeResample r;
  r.mode = d.mode, r.dim = d.dim, r.out_dim = d.out_dim, r.compute = compute;
  if (d.mode == VaeResampleMode::kNone) return r;
  Conv3dParams sp;
  const bool down = d.mode == VaeResampleMode::kDown2d || d.mode == VaeResampleMode::kDown3d;
  if (down) {
    sp.stride = {1, 2, 2};
    sp.pad_bottom = sp.pad_right = 1;  // ZeroPad2d((0, 1, 0, 1))
  } else {
    sp.pad_top = sp.pad_bottom = sp.pad_left = sp.pad_right = 1;
  }
  r.spatial =
      Conv3d(w(d.prefix + "resample.1.weight"), w(d.prefix + "resample.1.bias"), sp, compute);
  if (d.mode == VaeResampleMode::kUp3d) r.up_time = causal(w, d.prefix + "time_conv", compute);
  if (d.mode == VaeResampleMode::kDown3d) {
    Conv3dParams tp;
    tp.stride = {2, 1, 1};
    r.down_time =
        Conv3d(w(d.prefix + "time_conv.weight"), w(d.prefix + "time_conv.bias"), tp, compute);
  }
  return r;
}

VaeCoder coder(const WeightFn& w, const std::string& p, const std::vector<VaeStageDesc>& stages,
               int64_t top, DType compute) {
  VaeCoder c;
  c.conv_in = causal(w, p + "conv1", compute);
  for (const auto& sd : stages) {
    VaeStage s;
    s.in = sd.in, s.out = sd.out, s.shortcut_t = sd.shortcut_t, s.shortcut_s = sd.shortcut_s;
    for (const auto& rd : sd.res) s.res.push_back(res_block(w, rd, compute));
    s.resample = resample(w, sd.resample, compute);
    c.stages.push_back(std::move(s));
  }
  c.mid0 = res_block(w, {p + "middle.0.", top, top}, compute);
  c.mid2 = res_block(w, {p + "middle.2.", top, top}, compute);
  c.attn.c = top;
  c.attn.gamma = vec(w, p + "middle.1.norm.gamma");
  c.attn.qkv = pointwise(w, p + "middle.1.to_qkv");
  c.attn.proj = pointwise(w, p + "middle.1.proj");
  c.head_gamma = vec(w, p + "head.0.gamma");
  c.head = causal(w, p + "head.2", compute);
  return c;
}

Tensor drop_batch(const Tensor& t, int rank) {
  if (t.rank() == rank + 1 && t.dim(0) == 1) return t.select(0, 0);
  return t;
}

// Channels-last [t, h, w, c] rows (channel range [c0, c0 + n)) -> channel-first [n, t, h, w].
Tensor to_channel_first(const float* x, int64_t t, int64_t h, int64_t w, int64_t c, int64_t c0,
                        int64_t n) {
  Tensor out = Tensor::zeros(Shape{n, t, h, w});
  float* o = out.mutable_data<float>();
  const int64_t px = t * h * w;
  for (int64_t p = 0; p < px; ++p)
    for (int64_t k = 0; k < n; ++k) o[k * px + p] = x[p * c + c0 + k];
  return out;
}

}  // namespace

WanVae::WanVae(const VaeConfig& config, const WeightFn& w, Precision precision, VaeParts parts)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  config.validate("WanVae");
  m.cfg = config;
  m.arch = vae_architecture(config);
  m.precision = precision;
  m.compute = precision == Precision::kBF16 ? DType::kBF16 : DType::kF32;
  m.parts = parts;
  if (parts != VaeParts::kDecoder) {
    m.enc = coder(w, "encoder.", m.arch.encoder, m.arch.enc_top, m.compute);
    m.quant = pointwise(w, "conv1");
  }
  if (parts != VaeParts::kEncoder) {
    m.dec = coder(w, "decoder.", m.arch.decoder, m.arch.dec_top, m.compute);
    m.post_quant = pointwise(w, "conv2");
  }
  m.mean = config.latent_mean;
  m.inv_std = config.latent_inv_std();
  m.weight_bytes = static_cast<size_t>(weight_bytes(config, precision, parts));
}

WanVae::~WanVae() = default;
WanVae::WanVae(WanVae&&) noexcept = default;
WanVae& WanVae::operator=(WanVae&&) noexcept = default;

const VaeConfig& WanVae::config() const { return impl_->cfg; }
Precision WanVae::precision() const { return impl_->precision; }
size_t WanVae::weight_bytes() const { return impl_->weight_bytes; }

void WanVae::set_latent_stats(const std::vector<float>& mean, const std::vector<float>& inv_std) {
  const auto z = static_cast<size_t>(impl_->cfg.z_dim);
  if (mean.size() != z || inv_std.size() != z)
    throw_input_error("latent statistics: expected ", z, " mean and ", z, " inv_std values, got ",
                      mean.size(), " and ", inv_std.size());
  impl_->mean = mean;
  impl_->inv_std = inv_std;
}

Frames WanVae::Impl::head_forward(VaeCoder& c, Frames x, const RunCtx& ctx) {
  return c.head.run(ctx, x.t, x.h, x.w, [&](void* dst) {
    rms_norm_channels(x.data.data(), dst, compute, x.rows(), x.c, c.head_gamma.data(), true);
    x = Frames();
  });
}

Tensor WanVae::encode(const Tensor& video_in, const CaptureFn& capture) {
  Impl& m = *impl_;
  const VaeConfig& cfg = m.cfg;
  if (m.parts == VaeParts::kDecoder)
    throw_input_error("encode: this VAE was loaded without its encoder (decoder only)");
  const Tensor video = drop_batch(video_in, 4);
  if (video.rank() != 4 || video.dim(0) != 3)
    throw_input_error("video: expected [3, T, H, W] (or [1, 3, T, H, W]), got ",
                      video_in.shape().str());
  if (!is_float(video.dtype()))
    throw_input_error("video: expected a float tensor, got ", video.describe());
  // The encoder makes the same buffers once per chunk of frames: keep their pages between them.
  const PageReuse reuse;
  const int64_t t = video.dim(1), hh = video.dim(2), ww = video.dim(3);
  const int64_t ts = cfg.temporal_stride(), ss = cfg.spatial_stride();
  if (t < 1 || (t - 1) % ts != 0)
    throw_input_error("video: ", t, " frames; the Wan ", cfg.version_name(), " VAE needs ", ts,
                      "k+1 frames (e.g. ", (t - 1) / ts * ts + 1, " or ",
                      ((t - 1) / ts + 1) * ts + 1, ")");
  if (hh % ss != 0 || ww % ss != 0 || hh == 0 || ww == 0)
    throw_input_error("video: ", hh, "x", ww, " (HxW) is not a multiple of the Wan ",
                      cfg.version_name(), " VAE's spatial stride ", ss);
  m.enc.reset();
  const int64_t p = cfg.patch(), chunks = 1 + (t - 1) / ts;
  const int64_t lh = hh / ss, lw = ww / ss, z2 = 2 * cfg.z_dim;
  Buffer<float> enc_out(static_cast<size_t>(chunks * lh * lw * z2));  // [T', h, w, 2z]
  RunCtx ctx;
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t t0 = k == 0 ? 0 : 1 + ts * (k - 1), n = k == 0 ? 1 : ts;
    Frames x = Frames::make(n, hh / p, ww / p, cfg.io_channels());
    patchify_frames(video, t0, n, p, x.data.data());
    x = m.enc.conv_in.run(ctx, x.t, x.h, x.w, [&](void* dst) {
      fill_converted(x.data.data(), x.rows() * x.c, m.compute, dst);
    });
    for (auto& s : m.enc.stages) x = s.forward(std::move(x), ctx, /*encoder=*/true);
    x = m.enc.mid0.forward(std::move(x), ctx);
    x = m.enc.attn.forward(x);
    x = m.enc.mid2.forward(std::move(x), ctx);
    Frames o = m.head_forward(m.enc, std::move(x), ctx);
    VIDAX_CHECK(o.t == 1 && o.h == lh && o.w == lw && o.c == z2, "encoder chunk output ", o.t, "x",
                o.h, "x", o.w, "x", o.c);
    std::memcpy(enc_out.data() + k * lh * lw * z2, o.data.data(),
                static_cast<size_t>(lh * lw * z2) * sizeof(float));
  }
  m.enc.reset();  // the carried frames are only needed within one encode
  const int64_t rows = chunks * lh * lw;
  Buffer<float> q(static_cast<size_t>(rows * z2));
  m.quant.forward(enc_out.data(), rows, q.data());
  const int64_t z = cfg.z_dim;
  Tensor mu = to_channel_first(q.data(), chunks, lh, lw, z2, 0, z);  // [z, T', h, w]
  if (capture) {
    capture("enc_out", to_channel_first(enc_out.data(), chunks, lh, lw, z2, 0, z2).unsqueeze(0));
    capture("mu_raw", mu.clone().unsqueeze(0));
    capture("log_var", to_channel_first(q.data(), chunks, lh, lw, z2, z, z).unsqueeze(0));
  }
  float* mp = mu.mutable_data<float>();
  const int64_t px = chunks * lh * lw;
  for (int64_t c = 0; c < z; ++c)
    for (int64_t i = 0; i < px; ++i)
      mp[c * px + i] =
          (mp[c * px + i] - m.mean[static_cast<size_t>(c)]) * m.inv_std[static_cast<size_t>(c)];
  return mu;
}

void WanVae::Impl::decode_from_stage(size_t stage, Frames x, const RunCtx& ctx,
                                     const std::function<void(Frames&&)>& emit) {
  for (; stage < dec.stages.size(); ++stage) {
    x = dec.stages[stage].forward(std::move(x), ctx, /*encoder=*/false);
    if (x.t > 1) {
      // Causal layers give the same result frame by frame: continue one frame at a time so
      // only one frame's activations exist at the higher resolutions. Split first and drop the
      // multi-frame buffer, so each waiting frame is held once.
      std::vector<Frames> frames;
      for (int64_t f = 0; f < x.t; ++f) frames.push_back(x.copy_frames(f, 1));
      x = Frames();
      for (Frames& f : frames) {
        decode_from_stage(stage + 1, std::move(f), ctx, emit);
        f = Frames();
      }
      return;
    }
  }
  emit(head_forward(dec, std::move(x), ctx));
}

void WanVae::Impl::decode_latent_frame(const Frames& zf, const RunCtx& ctx,
                                       const std::function<void(Frames&&)>& emit) {
  Frames x = dec.conv_in.run(ctx, zf.t, zf.h, zf.w, [&](void* dst) {
    fill_converted(zf.data.data(), zf.rows() * zf.c, compute, dst);
  });
  x = dec.mid0.forward(std::move(x), ctx);
  x = dec.attn.forward(x);
  x = dec.mid2.forward(std::move(x), ctx);
  decode_from_stage(0, std::move(x), ctx, emit);
}

}  // namespace vidax::wan
