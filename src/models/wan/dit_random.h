// Deterministic random weights for a Wan DiT config, by the tensor declaration: linear weights
// uniform with the variance of N(0, 1/fan_in), biases small, norm weights near 1, modulation
// tables N(0, 0.1^2)-like. For benchmarks and tests that need no checkpoint. Thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "models/wan/dit.h"

namespace vidax::wan {

// Returns a WeightFn generating each tensor on request (so a caller that packs and drops it
// never holds more than one plain tensor at a time) in `dtype` (F32 or BF16).
WeightFn random_dit_weights(const DitConfig& config, DType dtype, uint64_t seed);

// Writes those weights as an official-layout safetensors file with the config in its metadata,
// one tensor in memory at a time (a 14B model's 28.6 GB in bf16 need not fit in memory);
// atomically (io/safetensors.h). dtype F8_E4M3 writes ComfyUI's scaled-fp8 form instead: the
// `model.diffusion_model.` prefix, every linear weight as e4m3 codes (nearest) with a per-tensor
// `.scale_weight` = max |w| / 448, the other tensors bf16, and the `scaled_fp8` marker.
void write_random_dit_checkpoint(const std::string& path, const DitConfig& config, DType dtype,
                                 uint64_t seed);

}  // namespace vidax::wan
