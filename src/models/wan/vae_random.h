// Deterministic random weights for a Wan VAE config, by the tensor declaration (official
// names): conv weights uniform with the variance of N(0, 1/fan_in), biases with std 0.05, norm
// gammas near 1 (the fixtures' recipe, README section 3). For benchmarks and tests that need no
// checkpoint; write_random_vae() stores them as a checkpoint file. Thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "models/wan/dit.h"  // WeightFn
#include "models/wan/vae_config.h"

namespace vidax::wan {

// A WeightFn generating each tensor on request in `dtype` (F32, BF16 or F16).
WeightFn random_vae_weights(const VaeConfig& config, DType dtype, uint64_t seed);

// Writes every declared tensor (official names) to a safetensors file whose metadata holds the
// config, so VaeCheckpoint::open() reads it back with the same config.
void write_random_vae(const std::string& path, const VaeConfig& config, DType dtype, uint64_t seed);

}  // namespace vidax::wan
