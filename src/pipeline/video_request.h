// The geometry of a generation request: validating frames/size up front (with the nearest valid
// values in the message), the latent shape and the DiT token count, and the memory plan per
// phase that `vidax generate --dry-run` prints and that refuses requests that cannot fit.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/byte_size.h"  // format_bytes

namespace vidax {

struct VideoRequest {
  int64_t width = 832, height = 480, frames = 81;
};

// What the models impose: frames = 1 + temporal_stride*k, width/height multiples of
// `spatial_multiple` (VAE stride x DiT patch: 16 for Wan 2.1, 32 for Wan 2.2's VAE).
struct GeometryRules {
  int64_t temporal_stride = 4, spatial_multiple = 16;
};

// Throws InputError naming --frames / --size and proposing the nearest valid values.
void validate_video_request(const VideoRequest& request, const GeometryRules& rules);

struct LatentGeometry {
  int64_t channels = 0, frames = 0, height = 0, width = 0;  // the noise/latent [C, F, H, W]
  int64_t tokens = 0;                                       // DiT tokens after patching
};
LatentGeometry latent_geometry(const VideoRequest& request, int64_t z_dim, int64_t vae_stride_t,
                               int64_t vae_stride_hw, int64_t patch_t, int64_t patch_hw);

struct PhaseMemory {
  std::string phase;  // "encode text", "denoise", "decode"
  double weight_bytes = 0, activation_bytes = 0;
  double total() const { return weight_bytes + activation_bytes; }
};

// Phases run one after another and each releases its model before the next loads, so the
// peak is the largest phase plus what stays alive across phases (`resident_bytes`: contexts,
// the latent, the process baseline).
struct MemoryPlan {
  std::vector<PhaseMemory> phases;
  double resident_bytes = 0;
  double peak_bytes() const;
  const PhaseMemory& largest() const;
};

// MemAvailable from /proc/meminfo (bytes), or a negative value when it cannot be read.
double available_memory_bytes();

// Throws InputError when the plan's peak exceeds `available` (if available > 0), naming the
// largest phase and what would help (smaller size, fewer frames, bf16, tiling).
void require_fits(const MemoryPlan& plan, double available);

}  // namespace vidax
