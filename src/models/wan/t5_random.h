// Deterministic random weights for a umT5 config, by the tensor declaration (official names):
// projections uniform with the variance of N(0, 1/fan_in), norm weights 1 + U(+-0.17), the
// embedding and position tables with unit / 0.5 standard deviation (activations stay O(1), as in
// the fixtures). For benchmarks and tests without a checkpoint. Thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "models/wan/dit.h"  // WeightFn
#include "models/wan/t5_config.h"

namespace vidax::wan {

// A WeightFn generating each tensor on request in `dtype` (F32, BF16 or F16), so a caller that
// packs and drops it never holds more than one plain tensor at a time.
WeightFn random_t5_weights(const T5Config& config, DType dtype, uint64_t seed);

// Writes the same weights as a safetensors checkpoint with official names and the config in the
// metadata (`config`), which T5Checkpoint::open reads back.
void write_random_t5_checkpoint(const std::string& path, const T5Config& config, DType dtype,
                                uint64_t seed);

}  // namespace vidax::wan
