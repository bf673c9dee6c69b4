// Sinusoidal timestep embedding as the Wan reference computes it: positions and frequencies in
// double precision, [cos | sin] (cos first), cast to float at the end. Thread-safe.
#pragma once

#include <cstdint>

namespace vidax {

// out: [dim] floats for one timestep value; dim must be even.
void sinusoidal_embedding(double t, int64_t dim, float* out);

}  // namespace vidax
