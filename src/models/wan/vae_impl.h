// Private to the Wan VAE implementation (vae.cpp, vae_layers.cpp, vae_memory.cpp): the
// channels-last frame buffer, the causal layers with their carried frames, and the model.
//
// Every stateful layer keeps one state slot per independent stream: slot 0 for plain encode /
// decode, one per spatial tile for tiled decode (each tile is its own causal stream).
#pragma once

#include <functional>
#include <vector>

#include "core/buffer.h"
#include "core/page_buffer.h"
#include "kernels/cpu/gemm.h"
#include "models/wan/vae.h"
#include "models/wan/vae_tensors.h"
#include "nn/conv3d.h"

namespace vidax::wan {

// f32 scratch in its own page mapping (PageBuffer). The decoder's activations and staging
// buffers are 5-150 MB each and short-lived; from the heap, the ones under glibc's (moving) mmap
// threshold would leave freed-but-resident holes that grow the peak over a long clip.
struct FloatPages {
  PageBuffer mem;
  FloatPages() = default;
  explicit FloatPages(size_t n, PageBuffer::Init init = PageBuffer::Init::kZeros)
      : mem(n * sizeof(float), init) {}
  float* data() { return reinterpret_cast<float*>(mem.data()); }
  const float* data() const { return reinterpret_cast<const float*>(mem.data()); }
};

// Frames of one stream, channels-last [t, h, w, c] f32.
struct Frames {
  int64_t t = 0, h = 0, w = 0, c = 0;
  FloatPages data;

  // Zeros, or with kUndefined contents the caller overwrites whole (a reused mapping keeps
  // what its last owner wrote: see core/page_buffer.h).
  static Frames make(int64_t t, int64_t h, int64_t w, int64_t c,
                     PageBuffer::Init init = PageBuffer::Init::kZeros);
  int64_t frame_elems() const { return h * w * c; }
  int64_t rows() const { return t * h * w; }
  float* frame(int64_t i) { return data.data() + i * frame_elems(); }
  const float* frame(int64_t i) const { return data.data() + i * frame_elems(); }
  Frames copy_frames(int64_t begin, int64_t count) const;
};

struct RunCtx {
  size_t slot = 0;           // state slot (tile index)
  bool first_chunk = false;  // Wan 2.2 decoder: latent frame 0 (DupUp3D drops frames)
};

// Writes `t` frames [t, h, w, C_in] in the conv's compute dtype to `dst`.
using FillFn = std::function<void(void* dst)>;

// A causal conv (time stride 1) over a stream of frames, with one state slot per stream. A
// fresh slot carries zeros, which equals the reference's front zero padding. The past is
// carried in one of two forms, picked at construction by size:
//  - input frames (the usual case): the last kT - 1 input frames in the compute dtype, at the
//    front of a page-backed window; the new frames are written behind them, the conv reads the
//    window in place, the newest kT - 1 frames move to the front and the window's other pages
//    are released. Only the new frames are resident on top of the carry (no staging copy);
//  - output partial sums (few output channels: the heads, 96 -> 3 or 384 -> 32): the conv runs
//    as one 2-D conv with kT * C_out outputs (one group per time tap) on the new frames only,
//    and the slot keeps, per future output frame, the f32 sum of the taps already seen (kT - 1
//    frames of C_out channels instead of kT - 1 frames of C_in).
// The size rule behind the choice (shared with the memory estimates): partial sums cost
// (kT - 1) * C_out f32 per pixel, input frames (kT - 1) * C_in in the compute dtype; take them
// when they are at most half the size.
inline bool causal_conv_carries_partial_sums(int64_t kt, int64_t cin, int64_t cout, int64_t item) {
  return kt > 1 && cout * 4 * 2 <= cin * item;
}

class CausalConv {
 public:
  CausalConv() = default;
  // weight [C_out, C_in, kT, kH, kW], bias [C_out]; spatial padding from `params`.
  CausalConv(const Tensor& weight, const Tensor& bias, const Conv3dParams& params, DType compute);
  // t new frames [t, h, w, C_in] written by `fill` -> [t, h', w', C_out] f32. With `residual`
  // (same shape as the output), the conv output is added into it in place and it is returned.
  Frames run(const RunCtx& ctx, int64_t t, int64_t h, int64_t w, const FillFn& fill,
             Frames* residual = nullptr);
  void reset() { slots_.clear(); }
  bool carries_partial_sums() const { return partial_; }
  int64_t in_channels() const { return cin_; }
  DType compute_dtype() const { return conv_.compute_dtype(); }
  size_t weight_bytes() const;
  size_t cache_bytes() const;  // resident carried state of all slots

 private:
  struct Slot {
    // input frames: [carry + t, h, w, C_in] window, compute dtype, only `carry` frames resident
    // between calls; partial sums: [carry, h', w', C_out] f32.
    PageBuffer frames;
    int64_t h = -1, w = -1;
    size_t resident = 0;
  };
  Frames run_partial(Slot& s, int64_t t, int64_t h, int64_t w, const FillFn& fill,
                     Frames* residual);
  Conv3d conv_;  // the (kT, kH, kW) conv, or in partial mode the 2-D conv of the stacked taps
  int64_t kt_ = 1, cin_ = 0, cout_ = 0, carry_ = 0;
  bool partial_ = false;
  std::vector<float> bias_;  // partial mode (the taps conv has none)
  std::vector<Slot> slots_;
};

// Fills `dst` with x converted to `dtype` (F32 copy or BF16 rounding).
void fill_converted(const float* x, int64_t n, DType dtype, void* dst);

struct VaeResBlock {
  int64_t in = 0, out = 0;
  std::vector<float> gamma1, gamma2;
  CausalConv conv1, conv2;
  PackedLinear shortcut;  // 1x1x1 when in != out
  DType compute = DType::kF32;
  // Consumes x: without a shortcut conv its buffer receives the output (conv2 accumulates into
  // the residual in place).
  Frames forward(Frames x, const RunCtx& ctx);
};

// Single-head self-attention over the pixels of each frame (the middle block).
struct VaeAttention {
  int64_t c = 0;
  std::vector<float> gamma;
  PackedLinear qkv, proj;
  Frames forward(const Frames& x);
};

struct VaeResample {
  VaeResampleMode mode = VaeResampleMode::kNone;
  int64_t dim = 0, out_dim = 0;
  Conv3d spatial;      // 3x3 per frame (stride 2 with right/bottom pad for downsampling)
  CausalConv up_time;  // upsample3d: (3,1,1) conv to 2*dim channels = 2 frames
  Conv3d down_time;    // downsample3d: (3,1,1) conv with time stride 2
  DType compute = DType::kF32;
  struct Slot {
    bool seen = false;       // the first chunk passes the time conv by
    Buffer<std::byte> last;  // downsample3d: last frame after the spatial conv (compute dtype)
  };
  std::vector<Slot> slots;
  Frames forward(Frames x, const RunCtx& ctx);
  void reset() {
    slots.clear();
    up_time.reset();
  }
};

struct VaeStage {
  std::vector<VaeResBlock> res;
  VaeResample resample;
  int64_t in = 0, out = 0;
  int64_t shortcut_t = 0, shortcut_s = 0;  // Wan 2.2 AvgDown3D / DupUp3D (0: none)
  Frames forward(Frames x, const RunCtx& ctx, bool encoder);
  void reset();
};

struct VaeCoder {  // encoder or decoder
  CausalConv conv_in;
  std::vector<VaeStage> stages;
  VaeResBlock mid0, mid2;
  VaeAttention attn;
  std::vector<float> head_gamma;
  CausalConv head;
  void reset();
};

struct WanVae::Impl {
  VaeConfig cfg;
  VaeArchitecture arch;
  Precision precision = Precision::kFP32;
  DType compute = DType::kF32;
  VaeParts parts = VaeParts::kBoth;
  VaeCoder enc, dec;
  PackedLinear quant, post_quant;  // conv1 / conv2 (1x1x1), f32
  std::vector<float> mean, inv_std;
  size_t weight_bytes = 0;

  // Decoder from the conv_in input to the head output for one latent frame [1, h, w, z] of
  // stream ctx.slot; output frames go to `emit` ([n, H, W, io_channels] channels-last).
  void decode_latent_frame(const Frames& z, const RunCtx& ctx,
                           const std::function<void(Frames&&)>& emit);
  void decode_from_stage(size_t stage, Frames x, const RunCtx& ctx,
                         const std::function<void(Frames&&)>& emit);
  // Consumes x (freed once staged for the head conv).
  Frames head_forward(VaeCoder& coder, Frames x, const RunCtx& ctx);
};

}  // namespace vidax::wan
