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
namespace {

// For buffers that are written whole before they are read (conv outputs, staging copies): a
// reused mapping is not cleared first.
constexpr PageBuffer::Init kWritten = PageBuffer::Init::kUndefined;

}  // namespace

Frames Frames::make(int64_t t, int64_t h, int64_t w, int64_t c, PageBuffer::Init init) {
  Frames f;
  f.t = t, f.h = h, f.w = w, f.c = c;
  f.data = FloatPages(static_cast<size_t>(std::max<int64_t>(t * h * w * c, 1)), init);
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

namespace {

// memcpy split over the OpenMP threads (frames at the full resolution are ~77 MB in bf16).
void copy_bytes(std::byte* dst, const std::byte* src, size_t n) {
  constexpr size_t kChunk = size_t{1} << 20;
  const auto chunks = static_cast<int64_t>((n + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < chunks; ++i) {
    const size_t off = static_cast<size_t>(i) * kChunk;
    std::memcpy(dst + off, src + off, std::min(kChunk, n - off));
  }
}

}  // namespace

CausalConv::CausalConv(const Tensor& weight, const Tensor& bias, const Conv3dParams& params,
                       DType compute)
    : kt_(weight.dim(2)), cin_(weight.dim(1)), cout_(weight.dim(0)), carry_(weight.dim(2) - 1) {
  VIDAX_CHECK(weight.rank() == 5, "causal conv weight must be 5-D, got ", weight.describe());
  partial_ =
      causal_conv_carries_partial_sums(kt_, cin_, cout_, static_cast<int64_t>(dtype_size(compute)));
  if (!partial_) {
    conv_ = Conv3d(weight, bias, params, compute);
    return;
  }
  // Stack the time taps as output channels: taps[k * C_out + o] = weight[o, :, k].
  const Tensor wf = weight.to(DType::kF32).contiguous();
  const int64_t kh = weight.dim(3), kw = weight.dim(4), plane = kh * kw;
  Tensor taps = Tensor::zeros(Shape{kt_ * cout_, cin_, kh, kw});
  const float* src = wf.data<float>();
  float* dst = taps.mutable_data<float>();
  for (int64_t o = 0; o < cout_; ++o)
    for (int64_t i = 0; i < cin_; ++i)
      for (int64_t k = 0; k < kt_; ++k)
        std::memcpy(dst + ((k * cout_ + o) * cin_ + i) * plane,
                    src + ((o * cin_ + i) * kt_ + k) * plane,
                    static_cast<size_t>(plane) * sizeof(float));
  conv_ = Conv3d(taps, Tensor(), params, compute);
  bias_ = bias.defined() ? bias.to_float_vector() : std::vector<float>(cout_, 0.0f);
}

size_t CausalConv::weight_bytes() const {
  return conv_.weight_bytes() + bias_.size() * sizeof(float);
}

size_t CausalConv::cache_bytes() const {
  size_t n = 0;
  for (const auto& s : slots_) n += s.resident;
  return n;
}

Frames CausalConv::run(const RunCtx& ctx, int64_t t, int64_t h, int64_t w, const FillFn& fill,
                       Frames* residual) {
  const size_t item = dtype_size(conv_.compute_dtype());
  const size_t frame_bytes = static_cast<size_t>(h * w * cin_) * item;
  if (carry_ == 0) {
    PageBuffer staging(frame_bytes * static_cast<size_t>(t), kWritten);
    fill(staging.data());
    Frames out;
    if (residual == nullptr)
      out = Frames::make(t, conv_.out_height(h), conv_.out_width(w), cout_, kWritten);
    else
      out = std::move(*residual);
    conv_.forward(staging.data(), t, h, w, out.data.data(), residual != nullptr);
    return out;
  }
  if (slots_.size() <= ctx.slot) slots_.resize(ctx.slot + 1);
  Slot& s = slots_[ctx.slot];
  if (s.h >= 0)
    VIDAX_CHECK(s.h == h && s.w == w, "causal conv: frame size changed within a stream");
  if (partial_) return run_partial(s, t, h, w, fill, residual);
  const size_t carry_bytes = frame_bytes * static_cast<size_t>(carry_);
  const size_t need = carry_bytes + frame_bytes * static_cast<size_t>(t);
  if (s.frames.size() < need) {
    // A fresh mapping reads as zeros: a new stream starts from zero frames.
    PageBuffer grown(need);
    if (s.h >= 0) copy_bytes(grown.data(), s.frames.data(), carry_bytes);
    s.frames = std::move(grown);
  }
  s.frames.take_back();                 // the new frames go where the last call released
  fill(s.frames.data() + carry_bytes);  // [carry + t, h, w, C_in]
  Frames out;
  if (residual == nullptr)
    out = Frames::make(t, conv_.out_height(h), conv_.out_width(w), cout_, kWritten);
  else
    out = std::move(*residual);
  VIDAX_CHECK(
      out.t == t && out.h == conv_.out_height(h) && out.w == conv_.out_width(w) && out.c == cout_,
      "causal conv: residual shape");
  conv_.forward(s.frames.data(), carry_ + t, h, w, out.data.data(), residual != nullptr);
  // Keep the newest `carry` frames at the front, frame by frame in ascending order (source
  // frame k + t never overlaps destination frame k, and is not yet overwritten).
  for (int64_t k = 0; k < carry_; ++k)
    copy_bytes(s.frames.data() + frame_bytes * static_cast<size_t>(k),
               s.frames.data() + frame_bytes * static_cast<size_t>(k + t), frame_bytes);
  s.frames.release_from(carry_bytes);
  s.h = h, s.w = w;
  s.resident = carry_bytes;
  return out;
}

Frames CausalConv::run_partial(Slot& s, int64_t t, int64_t h, int64_t w, const FillFn& fill,
                               Frames* residual) {
  const int64_t ho = conv_.out_height(h), wo = conv_.out_width(w), px = ho * wo;
  const size_t item = dtype_size(conv_.compute_dtype());
  Frames taps = Frames::make(t, ho, wo, kt_ * cout_, kWritten);  // [t, h', w', kT * C_out]
  {
    PageBuffer staging(static_cast<size_t>(t * h * w * cin_) * item, kWritten);
    fill(staging.data());
    conv_.forward(staging.data(), t, h, w, taps.data.data());
  }
  const size_t partial_bytes = static_cast<size_t>(carry_ * px * cout_) * sizeof(float);
  if (s.frames.size() < partial_bytes) s.frames = PageBuffer(partial_bytes);  // zeros
  s.h = h, s.w = w;
  s.resident = partial_bytes;
  Frames out;
  if (residual == nullptr) {
    out = Frames::make(t, ho, wo, cout_, kWritten);
  } else {
    out = std::move(*residual);
    VIDAX_CHECK(out.t == t && out.h == ho && out.w == wo && out.c == cout_,
                "causal conv: residual shape");
  }
  // part[j]: sum of the taps seen so far for the output j + 1 frames after the last one
  // emitted. Frame x[s] contributes tap kT - 1 to out[s], tap kT - 2 - j to out[s + 1 + j].
  auto* part = reinterpret_cast<float*>(s.frames.data());  // [carry, h', w', C_out]
  const bool add = residual != nullptr;
  const int64_t kt = kt_, cout = cout_, carry = carry_;
  const float* bias = bias_.data();
  for (int64_t f = 0; f < t; ++f) {
    const float* a = taps.frame(f);
    float* o = out.frame(f);
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < px; ++p) {
      const float* ap = a + p * kt * cout;
      for (int64_t c = 0; c < cout; ++c) {
        const float y = bias[c] + part[p * cout + c] + ap[(kt - 1) * cout + c];
        o[p * cout + c] = add ? o[p * cout + c] + y : y;
        for (int64_t j = 0; j + 1 < carry; ++j)
          part[(j * px + p) * cout + c] =
              part[((j + 1) * px + p) * cout + c] + ap[(kt - 2 - j) * cout + c];
        part[((carry - 1) * px + p) * cout + c] = ap[c];
      }
    }
  }
  return out;
}

// --- Residual block: x + conv2(silu(norm2(conv1(silu(norm1(x)))))), shortcut when widths differ.

Frames VaeResBlock::forward(Frames x, const RunCtx& ctx) {
  Frames a = conv1.run(ctx, x.t, x.h, x.w, [&](void* dst) {
    rms_norm_channels(x.data.data(), dst, compute, x.rows(), in, gamma1.data(), true);
  });
  // The residual (x, or its 1x1 projection) receives conv2's output in place.
  Frames r;
  if (shortcut.defined()) {
    r = Frames::make(x.t, x.h, x.w, out, kWritten);
    shortcut.forward(x.data.data(), x.rows(), r.data.data());
  } else {
    r = std::move(x);
  }
  x = Frames();
  return conv2.run(
      ctx, a.t, a.h, a.w,
      [&](void* dst) {
        rms_norm_channels(a.data.data(), dst, compute, a.rows(), out, gamma2.data(), true);
        a = Frames();  // staged: free it before the conv runs
      },
      &r);
}

// --- Attention: per frame, q/k/v from one 1x1 conv, softmax(q k^T / sqrt(C)) v, 1x1 proj.

Frames VaeAttention::forward(const Frames& x) {
  Frames y = Frames::make(x.t, x.h, x.w, c, kWritten);
  const int64_t n = x.h * x.w;
  FloatPages xn(static_cast<size_t>(n * c)), qkv_buf(static_cast<size_t>(n * 3 * c)),
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
      Frames z = Frames::make(2 * y.t, y.h, y.w, dim, kWritten);
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
    PageBuffer small(static_cast<size_t>(x.rows() * dim) * item, kWritten);
    fill_converted(x.data.data(), x.rows() * dim, compute, small.data());
    const int64_t t = x.t, h = x.h, w = x.w;
    x = Frames();
    PageBuffer up(static_cast<size_t>(t * 4 * h * w * dim) * item, kWritten);
    upsample_nearest2x_bytes(small.data(), up.data(), t, h, w, dim * static_cast<int64_t>(item));
    small = PageBuffer();
    Frames out = Frames::make(t, 2 * h, 2 * w, out_dim, kWritten);
    spatial.forward(up.data(), t, 2 * h, 2 * w, out.data.data());
    return out;
  }
  // Downsampling: per-frame 3x3 stride-2 conv, then (3d) the strided time conv.
  Frames s = Frames::make(x.t, spatial.out_height(x.h), spatial.out_width(x.w), dim, kWritten);
  {
    PageBuffer in(static_cast<size_t>(x.rows() * dim) * item, kWritten);
    fill_converted(x.data.data(), x.rows() * dim, compute, in.data());
    spatial.forward(in.data(), x.t, x.h, x.w, s.data.data());
  }
  if (mode == VaeResampleMode::kDown2d) return s;
  const size_t frame_bytes = static_cast<size_t>(s.frame_elems()) * item;
  PageBuffer staging(frame_bytes * static_cast<size_t>(s.t + 1));
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

Frames VaeStage::forward(Frames x, const RunCtx& ctx, bool encoder) {
  // Wan 2.2 needs the stage input for its shortcut: the first block gets a copy.
  Frames h = res.front().forward(shortcut_s == 0 ? std::move(x) : x.copy_frames(0, x.t), ctx);
  for (size_t i = 1; i < res.size(); ++i) h = res[i].forward(std::move(h), ctx);
  h = resample.forward(std::move(h), ctx);
  if (shortcut_s == 0) return h;
  Frames s = Frames::make(h.t, h.h, h.w, out);
  if (encoder) {
    // x was moved above only when shortcut_s == 0 (returned already).
    const int64_t pad =
        (shortcut_t - x.t % shortcut_t) % shortcut_t;  // NOLINT(bugprone-use-after-move)
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
