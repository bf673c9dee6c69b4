// 3-D convolution over channels-last video frames, the building block of the Wan VAE: causal
// 3x3x3 and (3,1,1) time convolutions, 1x1x1 projections, and per-frame 2-D 3x3 convolutions
// (stride 1 with padding 1, or stride 2 with the VAE's right/bottom zero pad).
//
// Layout: activations are [T, H, W, C] (channels fastest); the weight is PyTorch's
// [C_out, C_in, kT, kH, kW] (or [C_out, C_in, kH, kW] for 2-D convs). Time is never padded
// here: the causal padding and the frames carried over from the previous chunk are the caller's
// business (it prepends them to the input), so `t_out = (t_in - kT) / stride_t + 1`. Space is
// zero-padded by the given amounts (asymmetric allowed).
//
// The work runs through oneDNN convolution primitives, created once per input extent
// (T, H, W) and cached; the weight is reordered once at construction into the blocked layout
// oneDNN picks (and once more per other layout if a later primitive asks for one). Compute F32:
// f32 input, weights and accumulation. Compute BF16: bf16 input and weights, f32 accumulation,
// f32 output (AMX on machines that have it); where oneDNN has no bf16 convolution (AVX2-only
// machines, kernels/cpu/onednn_bf16.h) the bf16 weights and each call's input are widened to f32
// and run by the f32 primitive: the same products, f32 sums, twice the weight memory
// (VIDAX_CONV=widened, read at construction, forces that path on any machine).
//
// Scratch memory: every primitive runs on one grow-only scratchpad per calling thread (the size
// of the largest primitive's), not one scratchpad per primitive.
//
// Thread-safety: forward() may be called from several threads (the primitive cache is guarded);
// oneDNN parallelises each call over the shared OpenMP pool.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "core/tensor.h"

namespace vidax {

struct Conv3dParams {
  std::array<int64_t, 3> stride = {1, 1, 1};  // (t, h, w)
  // Spatial zero padding (top, bottom, left, right).
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
};

class Conv3d {
 public:
  Conv3d();
  // weight [C_out, C_in, kT, kH, kW] or [C_out, C_in, kH, kW] (any float dtype), bias [C_out] or
  // undefined. compute: F32 or BF16.
  Conv3d(const Tensor& weight, const Tensor& bias, const Conv3dParams& params, DType compute);
  Conv3d(Conv3d&&) noexcept;
  Conv3d& operator=(Conv3d&&) noexcept;
  ~Conv3d();

  bool defined() const { return impl_ != nullptr; }
  int64_t in_channels() const;
  int64_t out_channels() const;
  std::array<int64_t, 3> kernel() const;  // (kT, kH, kW)
  const Conv3dParams& params() const;
  DType compute_dtype() const;
  bool widened() const;         // BF16 compute run as f32 on widened values (see above)
  size_t weight_bytes() const;  // bytes held by the reordered weights (all layouts)

  int64_t out_frames(int64_t t_in) const;
  int64_t out_height(int64_t h) const;
  int64_t out_width(int64_t w) const;

  // src [t_in, h, w, C_in] contiguous (f32 for compute F32, BFloat16 for BF16);
  // dst [t_out, h_out, w_out, C_out] f32. Requires t_in >= kT and a non-empty output.
  // accumulate: dst += conv(src) (+ bias) instead of dst = ... (oneDNN's sum post-op), so a
  // residual add needs no second output buffer.
  void forward(const void* src, int64_t t_in, int64_t h, int64_t w, float* dst,
               bool accumulate = false) const;

  // Name of the oneDNN implementation picked for an input extent ("brg:avx512_core_amx", ...).
  std::string implementation(int64_t t_in, int64_t h, int64_t w) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Plain scalar reference (double accumulation) with the same conventions, for tests.
// src f32 [t_in, h, w, C_in]; weight as above (F32); bias f32 or undefined. Returns
// [t_out, h_out, w_out, C_out] F32.
Tensor conv3d_reference(const Tensor& src, const Tensor& weight, const Tensor& bias,
                        const Conv3dParams& params);

// Whether a Conv3d with BF16 compute built now would take the widened path (see above): for
// memory planners, which must count f32 weights and a per-call f32 copy of the input then.
bool conv3d_widens_bf16();

}  // namespace vidax
