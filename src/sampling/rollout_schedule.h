// The few-step schedule of a causal rollout (Self-Forcing, CausVid; docs/rollout.md), with the
// reference's float32 arithmetic so that every timestep and sigma is bit for bit its own:
//
//  - The table: FlowMatchScheduler(shift, sigma_min = 0, extra_one_step = true)
//    .set_timesteps(1000): sigmas = shift s / (1 + (shift - 1) s) over s = torch.linspace(1, 0,
//    1001)[:-1], timesteps = 1000 sigmas, all float32 (torch_linspace_f32 reproduces ATen's
//    CPU linspace, vector path included).
//  - Denoising steps: the list as given (CausVid: [1000, 757, 522], integers passed to the
//    DiT), or with warp (Self-Forcing's warp_denoising_step) the table entries
//    timesteps[1000 - list] of the table extended by a final 0 (Self-Forcing's [1000, 750, 500,
//    250] gives t = 1000, 937.5, 833.333313, 625).
//  - The prediction to x0 at step k: x0 = float32(double(x) - double(sigma) * double(flow)) with
//    sigma = sigmas[argmin |timesteps - t_k|] compared in double (_convert_flow_pred_to_x0).
//  - Re-noising to step k + 1: (1 - sigma) * x0 + sigma * noise in float32, sigma from the
//    same lookup compared in float32 (add_noise).
//
// Thread-safe: pure functions.
#pragma once

#include <cstdint>
#include <vector>

namespace vidax {

// torch.linspace(start, end, steps) in float32 on a CPU (ATen's kernel: the first half counted
// from start, the second from end, 8-wide vectors whose first entry is a fused multiply-add).
std::vector<float> torch_linspace_f32(float start, float end, int64_t steps);

struct FlowMatchTable {
  std::vector<float> sigmas, timesteps;  // [train_steps] each, float32
};
FlowMatchTable flow_match_table(double shift, int64_t train_steps = 1000);

struct RolloutScheduleOptions {
  std::vector<double> steps{1000, 750, 500, 250};
  bool warp = true;
  double shift = 5.0;
};

struct RolloutSchedule {
  std::vector<float> t;            // per denoising step: the timestep given to the DiT
  std::vector<double> x0_sigma;    // per step: the sigma converting its prediction to x0
  std::vector<float> noise_sigma;  // per step k >= 1: the sigma re-noising into step k ([0] = 0)
};

// Throws InputError naming the bad value (no steps, a step outside [0, 1000], a warped step
// that is not an integer, shift <= 0).
RolloutSchedule rollout_schedule(const RolloutScheduleOptions& options);

// x0 = float32(double(x) - sigma * double(flow)) over n values (x0 may alias x).
void flow_to_x0(const float* x, const float* flow, double sigma, float* x0, int64_t n);
// out = (1 - sigma) * x0 + sigma * noise in float32 over n values (out may alias either).
void renoise(const float* x0, const float* noise, float sigma, float* out, int64_t n);

}  // namespace vidax
