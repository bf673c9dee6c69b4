// Seeded Gaussian noise identical to PyTorch's CPU generator: `torch_randn(seed, shape)` returns
// bit for bit what `torch.manual_seed(seed); torch.randn(shape)` (float32, CPU) returns in
// PyTorch 1.13 on an x86-64 machine running ATen's AVX2 kernels, so a user's seed gives the same
// initial latent as the official Wan scripts run on CPU. (The official pipelines seed a CUDA
// generator on GPU, a different algorithm that this does not reproduce.)
//
// How PyTorch makes the numbers (see docs/sampling.md for the long form):
//  - Generator: MT19937 seeded with the low 32 bits of the seed (standard init_genrand), i.e.
//    exactly std::mt19937(uint32_t(seed)).
//  - numel >= 16 (contiguous float32): one 32-bit draw per element gives a float uniform
//    u = (draw & 0xFFFFFF) * 2^-24. Then every 16-element chunk becomes 16 normals by Box-Muller
//    on its halves: for j < 8, r = sqrt(-2 log(1 - u[j])), theta = float(2 pi) * u[j + 8],
//    out[j] = r cos(theta), out[j + 8] = r sin(theta), with log/sincos the AVX2 Cephes-style
//    polynomials of ATen's avx_mathfun.h as GCC compiles them (multiply-adds fused into FMAs).
//    When numel % 16 != 0, 16 fresh uniforms are drawn into the last 16 slots (overwriting
//    normals already produced there) and that last chunk is transformed again.
//  - numel < 16: element by element, double precision: two 64-bit uniforms
//    ((hi << 32 | lo) & (2^53 - 1)) * 2^-53 from four draws, r = sqrt(-2 log(1 - u2)),
//    theta = 2 pi u1; the element gets r cos(theta) and the next element the cached r sin(theta).
//
// Thread-safe: pure function (the generator is local to the call).
#pragma once

#include <cstdint>
#include <optional>
#include <random>

#include "core/shape.h"
#include "core/tensor.h"

namespace vidax {

// New contiguous F32 tensor of `shape` filled as torch.randn after torch.manual_seed(seed).
Tensor torch_randn(uint64_t seed, const Shape& shape);

// PyTorch's CPU generator as a stream: successive randn() calls continue it exactly as
// successive torch.randn / randn_like calls on one CPU generator after torch.manual_seed(seed)
// (the normal cached by a small draw included), e.g. Self-Forcing's initial noise and then its
// per-step noise. Not thread-safe; copyable (a copy continues independently).
class TorchGenerator {
 public:
  explicit TorchGenerator(uint64_t seed);
  Tensor randn(const Shape& shape);
  void randn(float* out, int64_t n);
  // Advances the stream exactly as randn of n elements would, without keeping the numbers.
  void skip_randn(int64_t n);

 private:
  std::mt19937 gen_;
  std::optional<double> cached_normal_;  // the sin half of the last double Box-Muller pair
};

}  // namespace vidax
