#include "sampling/flow_schedule.h"

#include <cmath>

#include "core/error.h"

// numpy evaluates each array operation separately; keep a * b + c from becoming an FMA.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace vidax {
namespace {

constexpr double kNumTrainTimesteps = 1000.0;

FlowSchedule finish(const std::vector<double>& shifted) {
  FlowSchedule schedule;
  schedule.timesteps.reserve(shifted.size());
  schedule.sigmas.reserve(shifted.size() + 1);
  for (double s : shifted) {
    const double t = s * kNumTrainTimesteps;
    schedule.timesteps.push_back(static_cast<int64_t>(t));  // truncation, as .to(torch.int64)
    schedule.sigmas.push_back(static_cast<float>(s));
  }
  schedule.sigmas.push_back(0.0f);
  return schedule;
}

void check_args(int steps, double shift) {
  VIDAX_CHECK(steps >= 1, "steps must be >= 1, got ", steps);
  VIDAX_CHECK(shift > 0 && std::isfinite(shift), "shift must be > 0, got ", shift);
}

}  // namespace

std::vector<double> numpy_linspace(double start, double stop, int64_t num) {
  VIDAX_CHECK(num >= 1, "linspace needs at least one point");
  std::vector<double> y(static_cast<size_t>(num));
  if (num == 1) {
    y[0] = start;
    return y;
  }
  const double delta = stop - start;
  const double div = static_cast<double>(num - 1);
  const double step = delta / div;
  for (int64_t i = 0; i < num; ++i) {
    double v;
    if (step == 0) {  // numpy's denormal guard: (i / div) * delta
      v = static_cast<double>(i) / div;
      v = v * delta;
    } else {
      v = static_cast<double>(i) * step;
    }
    y[static_cast<size_t>(i)] = v + start;
  }
  y.back() = stop;
  return y;
}

double shift_sigma(double sigma, double shift) {
  const double numerator = shift * sigma;
  const double scaled = (shift - 1.0) * sigma;
  const double denominator = 1.0 + scaled;
  return numerator / denominator;
}

FlowSchedule unipc_schedule(int steps, double shift) {
  check_args(steps, shift);
  std::vector<double> s = numpy_linspace(kUniPCSigmaMax, 0.0, steps + 1);
  s.pop_back();
  for (double& v : s) v = shift_sigma(v, shift);
  return finish(s);
}

FlowSchedule dpmpp_schedule(int steps, double shift) {
  check_args(steps, shift);
  std::vector<double> s = numpy_linspace(1.0, 0.0, steps + 1);
  s.pop_back();
  // get_sampling_sigmas shifts once; the scheduler's own shift (1) is the identity
  // 1 * s / (1 + 0 * s), exact in IEEE arithmetic.
  for (double& v : s) v = shift_sigma(v, shift);
  return finish(s);
}

FlowSchedule euler_schedule(int steps, double shift) { return unipc_schedule(steps, shift); }

}  // namespace vidax
