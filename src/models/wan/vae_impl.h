// Private to the Wan VAE implementation (vae.cpp, vae_layers.cpp, vae_memory.cpp): the
// channels-last frame buffer, the causal layers with their carried frames, and the model.
//
// Every stateful layer keeps one state slot per independent stream: slot 0 for plain encode /
// decode, one per spatial tile for tiled decode (each tile is its own causal stream).
#pragma once

#include <functional>
#include <vector>

#include "core/buffer.h"
#include "kernels/cpu/gemm.h"
#include "models/wan/vae.h"
#include "models/wan/vae_tensors.h"
#include "nn/conv3d.h"

namespace vidax::wan {

// Frames of one stream, channels-last [t, h, w, c] f32.
struct Frames {
  int64_t t = 0, h = 0, w = 0, c = 0;
  Buffer<float> data;

  static Frames make(int64_t t, int64_t h, int64_t w, int64_t c);
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

// A causal conv (kT = 1 or 3, time stride 1) carrying its last kT - 1 input frames per slot;
// a fresh slot carries zeros, which equals the reference's front zero padding.
class CausalConv {
 public:
  CausalConv() = default;
  explicit CausalConv(Conv3d conv);
  Frames run(const RunCtx& ctx, int64_t t, int64_t h, int64_t w, const FillFn& fill);
  void reset() { slots_.clear(); }
  const Conv3d& conv() const { return conv_; }
  size_t cache_bytes() const;

 private:
  struct Slot {
    Buffer<std::byte> frames;  // [carry, h, w, C_in] in the compute dtype
    int64_t h = -1, w = -1;
  };
  Conv3d conv_;
  int64_t carry_ = 0;
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
  Frames forward(const Frames& x, const RunCtx& ctx);
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
  Frames forward(const Frames& x, const RunCtx& ctx, bool encoder);
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
