#include "sampling/rollout_schedule.h"

#include <cmath>

#include "core/error.h"

// Every product and sum below is rounded on its own (the reference's float32 tensor ops), and
// the one fused multiply-add of ATen's linspace is an explicit std::fma.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace vidax {

std::vector<float> torch_linspace_f32(float start, float end, int64_t steps) {
  std::vector<float> out(static_cast<size_t>(std::max<int64_t>(steps, 0)));
  if (steps <= 0) return out;
  if (steps == 1) {
    out[0] = start;
    return out;
  }
  const float step = (end - start) / static_cast<float>(steps - 1);
  const int64_t halfway = steps / 2;
  auto one = [&](int64_t idx) {  // the scalar lambda (FMA-contracted in the AVX2 build)
    if (idx < halfway) return std::fma(step, static_cast<float>(idx), start);
    return std::fma(-step, static_cast<float>(steps - idx - 1), end);
  };
  constexpr int64_t kVec = 8;                             // Vectorized<float> under AVX2
  const int64_t vector_end = steps - steps % (2 * kVec);  // the loop takes two vectors a turn
  int64_t idx = 0;
  for (; idx < vector_end; idx += kVec) {
    const float base = one(idx);  // Vectorized::arange(base, step): base + i * step
    for (int64_t i = 0; i < kVec; ++i)
      out[static_cast<size_t>(idx + i)] = base + static_cast<float>(i) * step;
  }
  for (; idx < steps; ++idx) out[static_cast<size_t>(idx)] = one(idx);
  return out;
}

FlowMatchTable flow_match_table(double shift, int64_t train_steps) {
  FlowMatchTable t;
  std::vector<float> s = torch_linspace_f32(1.0f, 0.0f, train_steps + 1);
  s.pop_back();
  const auto sh = static_cast<float>(shift), sh1 = static_cast<float>(shift - 1);
  const auto scale = static_cast<float>(train_steps);
  for (float v : s) {
    const float sigma = sh * v / (1.0f + sh1 * v);
    t.sigmas.push_back(sigma);
    t.timesteps.push_back(sigma * scale);
  }
  return t;
}

namespace {

// argmin |timesteps - t| (the first on ties), the difference in double or in float32.
size_t nearest_f64(const FlowMatchTable& table, double t) {
  size_t best = 0;
  double best_d = INFINITY;
  for (size_t i = 0; i < table.timesteps.size(); ++i) {
    const double d = std::abs(static_cast<double>(table.timesteps[i]) - t);
    if (d < best_d) best_d = d, best = i;
  }
  return best;
}

size_t nearest_f32(const FlowMatchTable& table, float t) {
  size_t best = 0;
  float best_d = INFINITY;
  for (size_t i = 0; i < table.timesteps.size(); ++i) {
    const float d = std::abs(table.timesteps[i] - t);
    if (d < best_d) best_d = d, best = i;
  }
  return best;
}

}  // namespace

RolloutSchedule rollout_schedule(const RolloutScheduleOptions& o) {
  if (o.steps.empty()) throw_input_error("rollout steps: the list is empty");
  if (!(o.shift > 0) || !std::isfinite(o.shift))
    throw_input_error("rollout shift: ", o.shift, " (expected > 0)");
  const FlowMatchTable table = flow_match_table(o.shift);
  RolloutSchedule s;
  for (double v : o.steps) {
    if (!(v >= 0 && v <= 1000)) throw_input_error("rollout steps: ", v, " is outside [0, 1000]");
    if (o.warp) {
      if (v != std::floor(v))
        throw_input_error("rollout steps: ", v,
                          " is not an integer (warped steps index the table)");
      const auto i = static_cast<size_t>(1000 - static_cast<int64_t>(v));
      s.t.push_back(i < table.timesteps.size() ? table.timesteps[i] : 0.0f);
    } else {
      s.t.push_back(static_cast<float>(std::trunc(v)));  // the reference holds the list as int64
    }
  }
  for (size_t k = 0; k < s.t.size(); ++k) {
    s.x0_sigma.push_back(table.sigmas[nearest_f64(table, s.t[k])]);
    s.noise_sigma.push_back(k == 0 ? 0.0f : table.sigmas[nearest_f32(table, s.t[k])]);
  }
  return s;
}

void flow_to_x0(const float* x, const float* flow, double sigma, float* x0, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    x0[i] = static_cast<float>(static_cast<double>(x[i]) - sigma * static_cast<double>(flow[i]));
}

void renoise(const float* x0, const float* noise, float sigma, float* out, int64_t n) {
  const float keep = 1.0f - sigma;
  for (int64_t i = 0; i < n; ++i) out[i] = keep * x0[i] + sigma * noise[i];
}

}  // namespace vidax
