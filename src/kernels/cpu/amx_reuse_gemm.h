// Channel-group reuse in a linear layer (Kaleido, accel/kaleido.h) as one fused AMX-BF16 kernel.
// Across denoising steps the input of a linear moves little in most channels; the kept product
// of the previous call is updated with the product of the channels that moved only:
//   kept += (x - ref)[moved] . W[:, moved]^T        y = activation(kept)
// Channels come in groups of 32 (one AMX K step). A row's group moved when any channel c of it
// satisfies |x - ref| - limit[c] > 0 (bf16 values compared in f32); ref follows x in the groups
// that moved and keeps its old values elsewhere, so the inputs a kept product stands for stay
// within the limits of x (no drift). The delta is rounded to bf16 before its product is added,
// so the kept product carries that rounding (as a bf16 GEMM's inputs do) until a refresh. A 32-row
// block computes a K step when any of its rows moved in that group (the tile is the unit of skipped
// work); rows that did not move contribute zero to that step.
//
// One pass per 32-row block and K chunk does the decisions, the delta (x - ref rounded to bf16,
// written straight into the A-tile layout), the ref update and the per-channel sums of x^2; the
// tiles start from the kept product, and the epilogue writes the new kept
// product (f32, before the activation) and the activated output in one store pass, overlapped
// with the next block's tile products as in amx_gemm_bf16. The kept product is stored in 32x32
// blocks, so both touch 4 KiB at a time instead of 32 rows a page apart. The weights stream as in
// the dense kernel (panels shared by up to 8 row blocks, K in chunks of at most 64 steps).
//
// Requires amx_bf16_usable() and bf16 weights (not fp8). Parallel over 32-row blocks on the
// OpenMP pool (on the calling thread alone inside an active parallel region). Thread-safety: the
// state's buffers are written; distinct calls need distinct states and outputs.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/cpu/amx_gemm.h"

namespace vidax {

struct AmxReuseState {
  BFloat16* ref = nullptr;  // [m, w.k()] row-major: the inputs of the kept product; updated
  float* kept = nullptr;  // amx_reuse_kept_elements(m, w): the product before the activation, bias
                          // included, in 32x32 blocks (amx_reuse_kept_index); updated
  const float* limit = nullptr;  // [w.k()] per-channel allowance (unused when `first`)
  float* sumsq = nullptr;        // [w.k()] out: per-channel sum of x^2 over the m rows, summed per
                                 // 32-row block in row order, then over the blocks in order (the
                                 // same for every thread count; as channel_group_update)
  bool first = false;  // every group is computed: ref and kept are written, not read (the tiles
                       // start at zero and the epilogue adds the bias, as amx_gemm_bf16 does)
};

struct AmxReuseCounts {
  int64_t groups_reused = 0;  // (row, channel group) pairs that did not move
  int64_t steps_skipped = 0;  // (32-row block, K step) pairs the tiles skipped
  double flops_skipped = 0;   // 2 x rows x channels x n over the skipped pairs
};

struct AmxReuseOutput {
  float* f32 = nullptr;  // [m, w.n()], or
  BFloat16* bf16 = nullptr;
};

// The kept product's layout: 32x32 blocks (32 rows x one weight panel's 32 columns, row-major
// inside, padded), the row blocks of one panel after each other (the kernel's inner loop), so
// the tiles load and the epilogue stores 4 KiB at a time, in order (one page each when the
// buffer is page-aligned, e.g. core/buffer.h from 4 MiB up). A block that computes nothing is
// read by the epilogue in place. The padding is never written to the output. Elements for m rows,
// and where element (r, c) of an m-row product is.
int64_t amx_reuse_kept_elements(int64_t m, const AmxPackedWeight& w);
int64_t amx_reuse_kept_index(int64_t m, int64_t r, int64_t c);

// x: m rows of w.k() values (bf16, or f32 rounded to nearest even while it is read), row stride
// x_stride >= w.k(). `epilogue` is applied to the kept product for the output only; after the
// first call the tanh GELU is evaluated in f32 (a few ulp; amx_tiles-inl.h gelu_tanh_f32_ps),
// since these outputs carry the reuse error anyway and the exact one dominates a call that
// reuses most of its product.
AmxReuseCounts amx_gemm_bf16_reuse(const BFloat16* x, int64_t m, int64_t x_stride,
                                   const AmxPackedWeight& w, GemmEpilogue epilogue,
                                   const AmxReuseState& state, const AmxReuseOutput& y);
AmxReuseCounts amx_gemm_bf16_reuse(const float* x, int64_t m, int64_t x_stride,
                                   const AmxPackedWeight& w, GemmEpilogue epilogue,
                                   const AmxReuseState& state, const AmxReuseOutput& y);

// The same in plain C++ on any machine (bf16 products summed in double, read from the packed
// layout; the activation by the library's gelu): the reference the kernel is tested against.
AmxReuseCounts gemm_reuse_reference(const BFloat16* x, int64_t m, int64_t x_stride,
                                    const AmxPackedWeight& w, GemmEpilogue epilogue,
                                    const AmxReuseState& state, float* y);

}  // namespace vidax
