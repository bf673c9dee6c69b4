// Linear layers on the CPU through oneDNN matmul: y[M, N] = x[M, K] · W[N, K]^T (+ bias[N]).
//
// The weight is packed once (at load) into the blocked layout oneDNN's matmul asks for, in the
// compute dtype: F32 weights for the fp32 path, BF16 weights for the bf16 path (bf16 x bf16
// products, f32 accumulation and f32 output). Primitives are created once per row count M and
// cached. An optional fused GELU (tanh or erf) post-op runs inside the GEMM.
//
// With compute BF16 on a machine with usable AMX-BF16, the weight is packed for and run by our
// own AMX kernel (kernels/cpu/amx_gemm.h) instead. Without AMX, where bf16 dot products are the
// fast unit (bf16_dot_product_fast, AMD Zen 4+) oneDNN's own bf16 kernels run; elsewhere the
// bf16 values are widened to f32 and run by oneDNN's f32 GEMM, whose FMA rate is twice
// vdpbf16ps's on Intel without AMX (same products, f32 sums). On that path the weights stay bf16 in
// memory (in oneDNN's f32 packed layout) and are widened per call into a per-thread scratch as
// large as the largest weight; x is widened in 512-row slices. The environment variable VIDAX_GEMM
// (read when a PackedLinear is constructed) = onednn forces oneDNN's bf16 kernels (where oneDNN has
// them: not on AVX2-only machines, kernels/cpu/onednn_bf16.h), = widened the widened path, so the
// paths can be compared in one build.
//
// Thread-safety: forward() may be called from one thread at a time per PackedLinear (the
// primitive cache is guarded, but oneDNN itself parallelises with the shared OpenMP pool).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/tensor.h"

namespace vidax {

enum class GemmEpilogue { kNone, kGeluTanh, kGeluErf };

// Bytes per weight element a PackedLinear of this compute dtype holds: 4 for F32, 2 for BF16 on
// every path (the widened path's per-thread f32 scratch is one weight, not counted). For plans.
int64_t gemm_weight_item_bytes(DType compute);

// Whether BF16 PackedLinears built now run widened (no AMX and no fast bf16 dot products, no
// oneDNN bf16 at all, or VIDAX_GEMM=widened): they then
// need a per-thread f32 scratch of their largest weight.
bool gemm_widens_bf16();

// Whether kept fp8/fp16 linears (PackedLinear::kept) of this compute dtype built now widen the
// whole weight per call into a per-thread scratch of the kernel dtype (the oneDNN paths), rather
// than per tile inside the kernel (fp8 on the AMX path).
bool gemm_kept_widens_whole(DType compute);

class AmxPackedWeight;

class PackedLinear {
 public:
  PackedLinear();
  // weight [N, K] (F32/BF16/F16, any float dtype: converted to `compute`), bias [N] or undefined.
  PackedLinear(const Tensor& weight, const Tensor& bias, DType compute,
               GemmEpilogue epilogue = GemmEpilogue::kNone);
  // Weights kept in their stored low-precision dtype. fp8: `codes` [N, K] F8_E4M3 or F8_E5M2
  // (the stored bytes),
  // the real weight being codes[n, k] x column_scale[n] (ComfyUI's scaled fp8: one scale per
  // tensor, repeated per row; fused parts may differ). Packed once into this compute path's
  // layout at one byte per element (half of bf16, a quarter of f32). On the AMX path the kernel
  // widens each panel's K chunk just before its tiles load (exactly: every fp8 value is a bf16
  // value; no weight-sized scratch) and its epilogue computes fma(y, column_scale[n], bias[n])
  // then the activation. On the oneDNN paths each forward widens the codes into one per-thread
  // scratch of the compute dtype (the whole weight), runs the GEMM without bias or activation,
  // then applies y[:, n] = y[:, n] * column_scale[n] + bias[n], then the epilogue.
  // Numerically this rounds differently from converting code x scale to bf16 at load (the
  // scale is applied in f32 after the f32 accumulation); it is closer to the f32 product.
  // fp16: `codes` [N, K] F16 with compute F32 only (where it halves the memory; bf16 holds the
  // same bytes), packed at two bytes per element and widened per call (exactly) into the f32
  // scratch like fp8 on the oneDNN paths; column_scale is then usually all ones.
  static PackedLinear kept(const Tensor& codes, std::vector<float> column_scale, const Tensor& bias,
                           DType compute, GemmEpilogue epilogue = GemmEpilogue::kNone);
  bool is_kept() const;
  PackedLinear(PackedLinear&&) noexcept;
  PackedLinear& operator=(PackedLinear&&) noexcept;
  ~PackedLinear();

  bool defined() const { return impl_ != nullptr; }
  int64_t in_features() const;
  int64_t out_features() const;
  DType compute_dtype() const;
  GemmEpilogue epilogue() const;
  // The AMX-packed bf16 weight (with its bias) when this linear runs on our AMX kernel (not fp8);
  // null on every other path. For kernels that reuse the packing (amx_gemm_bf16_reuse).
  const AmxPackedWeight* amx_weight() const;
  size_t packed_bytes() const;

  // x: [M, K] contiguous, f32 when compute is F32, BFloat16 when compute is BF16. y: [M, N] f32.
  void forward(const void* x, int64_t m, float* y) const;
  // Same, writing y as bf16 (rounded once from the f32 accumulators, after the epilogue): for
  // outputs that only feed another bf16 GEMM, e.g. the FFN hidden layer.
  void forward_bf16_out(const void* x, int64_t m, BFloat16* y) const;
  // Convenience: x any float dtype [M, K] (converted if needed) -> new F32 [M, N].
  Tensor operator()(const Tensor& x) const;

 private:
  void run(const void* x, int64_t m, void* y, bool bf16_out) const;
  // The widened path's loop: x bf16 widened kWidenRows rows at a time, run in f32 against
  // `weights` (f32, packed layout).
  void run_widened(const void* x, int64_t m, void* y, bool bf16_out, const float* weights) const;
  void run_fp8(const void* x, int64_t m, void* y, bool bf16_out) const;
  // One oneDNN matmul of m rows in the kernel dtype (primitive cached per (m, bf16_out)) with
  // `weights` in the packed layout (the stored weights, or their widened copy).
  void execute(const void* x, int64_t m, void* y, bool bf16_out, void* weights) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vidax
