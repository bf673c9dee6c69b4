#include "nn/timestep_embedding.h"

#include <cmath>

namespace vidax {

void sinusoidal_embedding(double t, int64_t dim, float* out) {
  const int64_t half = dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    // torch.pow(10000, -arange(half).div(half)) in float64, then outer(position, ...).
    const double freq = std::pow(10000.0, -static_cast<double>(i) / static_cast<double>(half));
    const double angle = t * freq;
    out[i] = static_cast<float>(std::cos(angle));
    out[half + i] = static_cast<float>(std::sin(angle));
  }
}

}  // namespace vidax
