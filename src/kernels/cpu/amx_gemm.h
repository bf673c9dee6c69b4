// Our own AMX-BF16 GEMM for linear layers: y[M, N] = x[M, K] · W[N, K]^T (+ bias[N]), optional
// GELU epilogue, bf16 x bf16 products with f32 accumulation, f32 or bf16 output.
//
// The weight is packed once into the AMX B-tile ("VNNI") layout: panels of 32 output columns,
// and within a panel, per 32-deep K step, two 16x16-column tiles of 16 rows x 64 bytes where row
// p holds (W[n][k0 + 2p], W[n][k0 + 2p + 1]) for the 16 columns n of the tile. N and K are
// zero-padded to multiples of 32. Activations are copied per M block (256 rows) into the A-tile
// layout (zero-padded rows and K), kept in L2 while the weight panels stream past; each 32x32
// output block accumulates in four 16x16 f32 tiles (see docs/kernels.md, "AMX GEMM").
//
// Every entry point requires amx_bf16_usable() (kernels/cpu/cpu_features.h); calling it on a
// machine without usable AMX is an internal error. fp8 weights (AmxPackedWeight::fp8) run through
// the same entry points; amx_gemm_bf16_reuse (amx_reuse_gemm.h) takes bf16 weights only. The kernel
// parallelises over (M block, N range) on the OpenMP pool; called from inside an active parallel
// region it runs on the calling thread alone. Thread-safety: an AmxPackedWeight is immutable after
// construction and may be shared by concurrent calls with distinct outputs.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/storage.h"
#include "core/tensor.h"
#include "kernels/cpu/gemm.h"  // GemmEpilogue

namespace vidax {

class AmxPackedWeight {
 public:
  AmxPackedWeight() = default;
  // weight [N, K] (any float dtype, converted to bf16 with round to nearest even), bias [N] (any
  // float dtype) or undefined.
  AmxPackedWeight(const Tensor& weight, const Tensor& bias);
  // Raw row-major bf16 weight [n, k] (row stride k); bias: n floats or null.
  AmxPackedWeight(const BFloat16* weight, int64_t n, int64_t k, const float* bias);
  // fp8 weights kept fp8: `codes` [n, k] row-major F8_E4M3 or F8_E5M2 bytes, packed into the same
  // layout at one byte per element. The GEMM widens each panel's K chunk to bf16 in a per-thread
  // buffer of at most 128 KiB just before its tiles are loaded (byte-table lookups, exact: every
  // fp8 value is a bf16 value), and its epilogue computes fma(acc, column_scale[n], bias[n]) before
  // the activation. `column_scale` has n values; `bias` n floats or null.
  static AmxPackedWeight fp8(const uint8_t* codes, DType fp8_dtype, int64_t n, int64_t k,
                             std::vector<float> column_scale, const float* bias);
  static size_t packed_elements(int64_t n, int64_t k);

  bool defined() const { return packed_ != nullptr; }
  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  int64_t k_steps() const { return k_steps_; }  // ceil(k / 32)
  int64_t panels() const { return panels_; }    // ceil(n / 32)
  size_t packed_bytes() const;
  bool is_fp8() const { return fp8_table_ != nullptr; }
  // Panel p's tiles: [k_steps][2 tiles][16 rows][32 bf16]; bf16 weights only.
  const uint16_t* panel(int64_t p) const {
    return reinterpret_cast<const uint16_t*>(packed_->data()) + p * k_steps_ * 1024;
  }
  // fp8 weights: panel p's codes in the same layout, one byte each (each 64 codes permuted for
  // the kernel's widening).
  const uint8_t* code_panel(int64_t p) const {
    return reinterpret_cast<const uint8_t*>(packed_->data()) + p * k_steps_ * 1024;
  }
  // fp8 weights: the bf16 value of each magnitude 0..127, low bytes then high bytes.
  const uint8_t* fp8_table() const { return fp8_table_; }
  const float* bias() const {
    return bias_ ? reinterpret_cast<const float*>(bias_->data()) : nullptr;
  }
  // fp8 weights: the per-output scale applied before the bias; null otherwise.
  const float* column_scale() const { return scale_.empty() ? nullptr : scale_.data(); }

 private:
  void pack(const BFloat16* weight, int64_t n, int64_t k, const float* bias);
  void set_shape(int64_t n, int64_t k);
  int64_t n_ = 0, k_ = 0, k_steps_ = 0, panels_ = 0;
  std::shared_ptr<Storage> packed_;
  std::shared_ptr<Storage> bias_;       // n_ floats, or null
  const uint8_t* fp8_table_ = nullptr;  // static, per fp8 dtype
  std::vector<float> scale_;
};

// x: m rows of w.k() bf16 values, row stride x_stride elements (>= k). y: [m, w.n()]
// contiguous. The epilogue (bias, then GELU) is applied to the f32 accumulators before the
// (single, round to nearest even) conversion of a bf16 output.
void amx_gemm_bf16(const BFloat16* x, int64_t m, int64_t x_stride, const AmxPackedWeight& w,
                   float* y, GemmEpilogue epilogue = GemmEpilogue::kNone);
void amx_gemm_bf16(const BFloat16* x, int64_t m, int64_t x_stride, const AmxPackedWeight& w,
                   BFloat16* y, GemmEpilogue epilogue = GemmEpilogue::kNone);
// f32 activations, rounded to bf16 (nearest even, as f32_to_bf16) while they are packed into
// tiles: the same result as rounding x first and calling the bf16 overload, without a separate
// conversion pass over x (e.g. keys read in place from a strided q/k/v buffer).
void amx_gemm_bf16(const float* x, int64_t m, int64_t x_stride, const AmxPackedWeight& w, float* y,
                   GemmEpilogue epilogue = GemmEpilogue::kNone);

}  // namespace vidax
