// The Wan VAE's layers on channels-last frames: causal convs with carried frames, residual
// blocks, the middle attention, resamplers and the Wan 2.2 stage shortcuts.
#include <cmath>
#include <cstring>

#include "core/convert.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/flash_attention.h"
#include "models/wan/vae_impl.h"
#include "nn/video_ops.h"

namespace vidax::wan {

Frames Frames::make(int64_t t, int64_t h, int64_t w, int64_t c) {
  Frames f;
  f.t = t, f.h = h, f.w = w, f.c = c;
  f.data.resize(static_cast<size_t>(std::max<int64_t>(t * h * w * c, 1)));
  return f;
}

Frames Frames::copy_frames(int64_t begin, int64_t count) const {
  VIDAX_CHECK(begin >= 0 && begin + count <= t, "copy_frames range");
  Frames f = make(count, h, w, c);
  std::memcpy(f.data.data(), frame(begin),
              static_cast<size_t>(count * frame_elems()) * sizeof(float));
  return f;
}

void fill_converted(const float* x, int64_t n, DType dtype, void* dst) {
  if (dtype == DType::kF32) {
    std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  constexpr int64_t kChunk = 1 << 16;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < n; b += kChunk)
    convert_floats(x + b, DType::kF32, static_cast<BFloat16*>(dst) + b, dtype,
                   static_cast<size_t>(std::min(kChunk, n - b)));
}

// --- CausalConv ---

CausalConv::CausalConv(Conv3d conv) : conv_(std::move(conv)), carry_(conv_.kernel()[0] - 1) {}

size_t CausalConv::cache_bytes() const {
  size_t n = 0;
  for (const auto& s : slots_) n += s.frames.size();
  return n;
}

Frames CausalConv::run(const RunCtx& ctx, int64_t t, int64_t h, int64_t w, const FillFn& fill) {
  const size_t item = dtype_size(conv_.compute_dtype());
  const size_t frame_bytes = static_cast<size_t>(h * w * conv_.in_channels()) * item;
  Buffer<std::byte> staging(frame_bytes * static_cast<size_t>(carry_ + t));
  if (carry_ > 0) {
    if (slots_.size() <= ctx.slot) slots_.resize(ctx.slot + 1);
    Slot& s = slots_[ctx.slot];
    if (s.h < 0) {
      std::memset(staging.data(), 0, frame_bytes * static_cast<size_t>(carry_));
    } else {
      VIDAX_CHECK(s.h == h && s.w == w, "causal conv: frame size changed within a stream");
      std::memcpy(staging.data(), s.frames.data(), frame_bytes * static_cast<size_t>(carry_));
    }
  }
  fill(staging.data() + frame_bytes * static_cast<size_t>(carry_));
  Frames out = Frames::make(t, conv_.out_height(h), conv_.out_width(w), conv_.out_channels());
  conv_.forward(staging.data(), carry_ + t, h, w, out.data.data());
  if (carry_ > 0) {
    Slot& s = slots_[ctx.slot];
    s.frames.resize(frame_bytes * static_cast<size_t>(carry_));
    std::memcpy(s.frames.data(), staging.data() + frame_bytes * static_cast<size_t>(t),
                frame_bytes * static_cast<size_t>(carry_));
    s.h = h, s.w = w;
  }
  return out;
}

// --- Residual block: x + conv2(silu(norm2(conv1(silu(norm1(x)))))), shortcut when widths differ.

Frames VaeResBlock::forward(const Frames& x, const RunCtx& ctx) {
  Frames a = conv1.run(ctx, x.t, x.h, x.w, [&](void* dst) {
    rms_norm_channels(x.data.data(), dst, compute, x.rows(), in, gamma1.data(), true);
  });
  Frames b = conv2.run(ctx, a.t, a.h, a.w, [&](void* dst) {
    rms_norm_channels(a.data.data(), dst, compute, a.rows(), out, gamma2.data(), true);
    a = Frames();  // staged: free it before the conv output is allocated
  });
  const int64_t n = b.rows() * out;
  if (shortcut.defined()) {
    Frames s = Frames::make(x.t, x.h, x.w, out);
    shortcut.forward(x.data.data(), x.rows(), s.data.data());
    add_rows(b.data.data(), s.data.data(), n);
  } else {
    add_rows(b.data.data(), x.data.data(), n);
  }
  return b;
}

// --- Attention: per frame, q/k/v from one 1x1 conv, softmax(q k^T / sqrt(C)) v, 1x1 proj.

Frames VaeAttention::forward(const Frames& x) {
  Frames y = Frames::make(x.t, x.h, x.w, c);
  const int64_t n = x.h * x.w;
  Buffer<float> xn(static_cast<size_t>(n * c)), qkv_buf(static_cast<size_t>(n * 3 * c)),
      att(static_cast<size_t>(n * c));
  for (int64_t f = 0; f < x.t; ++f) {
    rms_norm_channels(x.frame(f), xn.data(), DType::kF32, n, c, gamma.data(), false);
    qkv.forward(xn.data(), n, qkv_buf.data());  // [n, 3C]: q | k | v
    AttentionDims d{
        n,     n,     n,     1, c,
        3 * c, 3 * c, 3 * c, c, static_cast<float>(1.0 / std::sqrt(static_cast<double>(c)))};
    flash_attention(qkv_buf.data(), qkv_buf.data() + c, qkv_buf.data() + 2 * c, att.data(), d);
    proj.forward(att.data(), n, y.frame(f));
    add_rows(y.frame(f), x.frame(f), n * c);
  }
  return y;
}

// --- Resample ---

Frames VaeResample::forward(Frames x, const RunCtx& ctx) {
  if (mode == VaeResampleMode::kNone) return x;
  if (slots.size() <= ctx.slot) slots.resize(ctx.slot + 1);
  Slot& slot = slots[ctx.slot];
  const size_t item = dtype_size(compute);
  if (mode == VaeResampleMode::kUp3d) {
    if (!slot.seen) {
      slot.seen = true;  // the reference's 'Rep' marker: frame 0 skips the time conv
    } else {
      const Frames& in = x;
      Frames y = up_time.run(ctx, in.t, in.h, in.w, [&](void* dst) {
        fill_converted(in.data.data(), in.rows() * in.c, compute, dst);
      });  // [t, h, w, 2C]: channel halves are frames 2i and 2i+1
      Frames z = Frames::make(2 * y.t, y.h, y.w, dim);
      const int64_t px = y.h * y.w;
#pragma omp parallel for collapse(2) schedule(static)
      for (int64_t i = 0; i < y.t; ++i)
        for (int64_t p = 0; p < px; ++p)
          for (int64_t k = 0; k < 2; ++k)
            std::memcpy(z.frame(2 * i + k) + p * dim, y.frame(i) + p * 2 * dim + k * dim,
                        static_cast<size_t>(dim) * sizeof(float));
      x = std::move(z);
    }
  }
  if (mode == VaeResampleMode::kUp2d || mode == VaeResampleMode::kUp3d) {
    // Convert first, then upsample in the compute dtype: the 4x larger buffer is only built
    // once, in bf16 on the bf16 path.
    Buffer<std::byte> small(static_cast<size_t>(x.rows() * dim) * item);
    fill_converted(x.data.data(), x.rows() * dim, compute, small.data());
    const int64_t t = x.t, h = x.h, w = x.w;
    x = Frames();
    Buffer<std::byte> up(static_cast<size_t>(t * 4 * h * w * dim) * item);
    upsample_nearest2x_bytes(small.data(), up.data(), t, h, w, dim * static_cast<int64_t>(item));
    small = Buffer<std::byte>();
    Frames out = Frames::make(t, 2 * h, 2 * w, out_dim);
    spatial.forward(up.data(), t, 2 * h, 2 * w, out.data.data());
    return out;
  }
  // Downsampling: per-frame 3x3 stride-2 conv, then (3d) the strided time conv.
  Frames s = Frames::make(x.t, spatial.out_height(x.h), spatial.out_width(x.w), dim);
  {
    Buffer<std::byte> in(static_cast<size_t>(x.rows() * dim) * item);
    fill_converted(x.data.data(), x.rows() * dim, compute, in.data());
    spatial.forward(in.data(), x.t, x.h, x.w, s.data.data());
  }
  if (mode == VaeResampleMode::kDown2d) return s;
  const size_t frame_bytes = static_cast<size_t>(s.frame_elems()) * item;
  Buffer<std::byte> staging(frame_bytes * static_cast<size_t>(s.t + 1));
  fill_converted(s.data.data(), s.rows() * dim, compute, staging.data() + frame_bytes);
  Frames out;
  if (!slot.seen) {
    slot.seen = true;  // the first chunk passes by; its last frame is carried
    out = std::move(s);
  } else {
    VIDAX_CHECK(s.t % 2 == 0, "downsample3d expects an even number of frames, got ", s.t);
    std::memcpy(staging.data(), slot.last.data(), frame_bytes);
    out = Frames::make(s.t / 2, s.h, s.w, dim);
    down_time.forward(staging.data(), s.t + 1, s.h, s.w, out.data.data());
  }
  slot.last.resize(frame_bytes);
  std::memcpy(slot.last.data(), staging.data() + frame_bytes * static_cast<size_t>(x.t),
              frame_bytes);
  return out;
}

// --- Stage: residual blocks, resampler, and the Wan 2.2 shortcut around them.

Frames VaeStage::forward(const Frames& x, const RunCtx& ctx, bool encoder) {
  Frames h = res.front().forward(x, ctx);
  for (size_t i = 1; i < res.size(); ++i) h = res[i].forward(h, ctx);
  h = resample.forward(std::move(h), ctx);
  if (shortcut_s == 0) return h;
  Frames s = Frames::make(h.t, h.h, h.w, out);
  if (encoder) {
    const int64_t pad = (shortcut_t - x.t % shortcut_t) % shortcut_t;
    VIDAX_CHECK((x.t + pad) / shortcut_t == h.t, "AvgDown3D frames ", x.t, " -> ", h.t);
    avg_down3d(x.data.data(), s.data.data(), x.t, x.h, x.w, in, out, shortcut_t, shortcut_s, pad);
  } else {
    const int64_t drop = ctx.first_chunk ? shortcut_t - 1 : 0;
    VIDAX_CHECK(x.t * shortcut_t - drop == h.t, "DupUp3D frames ", x.t, " -> ", h.t);
    dup_up3d(x.data.data(), s.data.data(), x.t, x.h, x.w, in, out, shortcut_t, shortcut_s, drop);
  }
  add_rows(h.data.data(), s.data.data(), h.rows() * out);
  return h;
}

void VaeStage::reset() {
  for (auto& r : res) {
    r.conv1.reset();
    r.conv2.reset();
  }
  resample.reset();
}

void VaeCoder::reset() {
  conv_in.reset();
  for (auto& s : stages) s.reset();
  for (VaeResBlock* r : {&mid0, &mid2}) {
    r->conv1.reset();
    r->conv2.reset();
  }
  head.reset();
}

}  // namespace vidax::wan
