// Flow-matching noise schedules of the official Wan samplers: the sigmas (noise levels, 1 = pure
// noise, 0 = clean) a sampler walks through and the integer timesteps the DiT sees at each step.
//
// Both are built in double precision exactly as the reference builds them with numpy, then cast:
//   UniPC:  s = linspace(sigma_max, 0, steps + 1)[:-1], sigma_max = float32(0.999) (the first of
//           the float32 training sigmas 1 - linspace(1, 1/1000, 1000)[::-1]);
//   DPM++:  s = linspace(1, 0, steps + 1)[:steps]  (first sigma exactly 1, first timestep 1000);
//   both:   s = shift * s / (1 + (shift - 1) * s);
//           timesteps = int64(s * 1000)   (truncation toward zero, not rounding);
//           sigmas    = float32(concat(s, [0])).
// Euler uses the UniPC schedule (see docs/sampling.md for why).
//
// Thread-safe: pure functions.
#pragma once

#include <cstdint>
#include <vector>

namespace vidax {

struct FlowSchedule {
  std::vector<int64_t> timesteps;  // [steps], what the model sees
  std::vector<float> sigmas;       // [steps + 1], last entry 0
};

// float32(0.999) widened to double: the largest sigma of Wan's 1000-step training schedule.
inline constexpr double kUniPCSigmaMax = 0.9990000128746033;

// numpy.linspace(start, stop, num) (endpoint=True) with numpy's rounding: i * step + start,
// step = (stop - start) / (num - 1), last element exactly `stop`.
std::vector<double> numpy_linspace(double start, double stop, int64_t num);

// The timestep shift s' = shift * s / (1 + (shift - 1) * s), evaluated in numpy's order.
double shift_sigma(double sigma, double shift);

// Callers validate steps >= 1 and shift > 0 (make_scheduler raises InputError); these CHECK.
FlowSchedule unipc_schedule(int steps, double shift);
FlowSchedule dpmpp_schedule(int steps, double shift);
FlowSchedule euler_schedule(int steps, double shift);  // == unipc_schedule

}  // namespace vidax
