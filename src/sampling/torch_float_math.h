// float32 log, exp and expm1 exactly as PyTorch's CPU kernels compute them on an x86-64 machine
// running ATen's AVX2 code without MKL (the Debian PyTorch 1.13 that produced Wan's reference
// fixtures): torch.log / torch.exp / torch.expm1 on float tensors go through Vectorized<float>,
// i.e. SLEEF 3.5.1's 1-ulp functions (Sleef_logf8_u10, Sleef_expf8_u10, Sleef_expm1f8_u10) in
// their AVX2+FMA build. The solvers compute their scalar coefficients (log-SNRs, exp(-h),
// expm1(-h)) with these, so using them instead of the C library (which rounds differently in
// 1-4% of inputs) makes the sampler trajectories bit-identical to the reference.
//
// The algorithms are SLEEF's (Cody-Waite reduction, double-float arithmetic, minimax
// polynomials), re-expressed as scalar code: every fused multiply-add of the vector build is an
// explicit std::fma, every other operation is rounded on its own. Only the scalar coefficient
// math uses these; they are not fast and need not be.
//
// Thread-safe: pure functions.
#pragma once

namespace vidax::sampling_detail {

float torch_logf(float x);    // log(0) = -inf, log(x < 0) = NaN, log(inf) = inf
float torch_expf(float x);    // exp(-inf) = 0, exp(x > 100) = inf
float torch_expm1f(float x);  // expm1(-inf) = -1, expm1(-0) = -0

}  // namespace vidax::sampling_detail
