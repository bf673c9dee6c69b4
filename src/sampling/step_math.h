// Internal helpers shared by the samplers (not part of the public API): the float32 scalar
// arithmetic of the reference solvers and a parallel element loop.
//
// The reference computes every scalar coefficient as a torch 0-dim float32 tensor, so each one
// is rounded to float after every operation; log/exp/expm1 are PyTorch's float kernels
// (torch_float_math.h). Infinities are part of the contract: lambda(0) = +inf,
// lambda(1) = -inf (see docs/sampling.md).
// Including this header turns off floating-point contraction (a * b + c -> fma) for the rest of
// the translation unit: the reference rounds after every tensor op, and an FMA would not.
// Include it only from sampler .cpp files, after the other includes.
// Thread-safe: pure functions.
#pragma once

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <cstdint>

#include "sampling/torch_float_math.h"

namespace vidax::sampling_detail {

// Half log-SNR of the flow schedule: log(alpha) - log(sigma) with alpha = 1 - sigma.
inline float flow_lambda(float sigma) {
  const float alpha = 1.0f - sigma;
  const float log_alpha = torch_logf(alpha);
  const float log_sigma = torch_logf(sigma);
  return log_alpha - log_sigma;
}

// Runs f(i) for i in [0, n); parallel (OpenMP, static schedule) when n is large enough to pay
// for the threads. f must only touch element i.
template <typename F>
void for_each_element(int64_t n, F&& f) {
#pragma omp parallel for schedule(static) if (n >= (int64_t{1} << 16))
  for (int64_t i = 0; i < n; ++i) f(i);
}

}  // namespace vidax::sampling_detail
