#include "pipeline/video_request.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace vidax {
namespace {

// Nearest multiples of `m` below and above `v` (the lower one at least m).
std::string nearest_multiples(int64_t v, int64_t m) {
  const int64_t lo = std::max<int64_t>(m, v / m * m);
  const int64_t hi = std::max<int64_t>(m, (v + m - 1) / m * m);
  if (lo == hi) return std::to_string(lo);
  return str_cat(lo, " or ", hi);
}

}  // namespace

void validate_video_request(const VideoRequest& r, const GeometryRules& rules) {
  const int64_t ts = rules.temporal_stride;
  if (r.frames < 1 || (r.frames - 1) % ts != 0) {
    const int64_t k = std::max<int64_t>(0, (r.frames - 1) / ts);
    const int64_t lo = 1 + ts * k, hi = 1 + ts * (k + 1);
    throw_input_error("--frames ", r.frames, ": the frame count must be ", ts,
                      "k+1 (1, 5, 9, ..., 81); nearest valid: ",
                      r.frames < 1 ? std::to_string(1) : str_cat(lo, " or ", hi));
  }
  const int64_t m = rules.spatial_multiple;
  if (r.width < m || r.height < m || r.width % m != 0 || r.height % m != 0)
    throw_input_error("--size ", r.width, "x", r.height, ": width and height must be multiples of ",
                      m, " (at least ", m, "); nearest valid: width ",
                      nearest_multiples(r.width, m), ", height ", nearest_multiples(r.height, m));
  // Wan's RoPE table covers 1024 positions per axis; guard absurd sizes before any allocation.
  const int64_t kMaxSide = 8192, kMaxFrames = 4097;
  if (r.width > kMaxSide || r.height > kMaxSide)
    throw_input_error("--size ", r.width, "x", r.height, ": at most ", kMaxSide,
                      " pixels per side are supported");
  if (r.frames > kMaxFrames)
    throw_input_error("--frames ", r.frames, ": at most ", kMaxFrames, " frames are supported");
}

LatentGeometry latent_geometry(const VideoRequest& r, int64_t z_dim, int64_t vae_stride_t,
                               int64_t vae_stride_hw, int64_t patch_t, int64_t patch_hw) {
  LatentGeometry g;
  g.channels = z_dim;
  g.frames = (r.frames - 1) / vae_stride_t + 1;
  g.height = r.height / vae_stride_hw;
  g.width = r.width / vae_stride_hw;
  g.tokens = (g.frames / patch_t) * (g.height / patch_hw) * (g.width / patch_hw);
  return g;
}

double MemoryPlan::peak_bytes() const { return resident_bytes + largest().total(); }

const PhaseMemory& MemoryPlan::largest() const {
  VIDAX_CHECK(!phases.empty(), "empty memory plan");
  return *std::max_element(phases.begin(), phases.end(),
                           [](const auto& a, const auto& b) { return a.total() < b.total(); });
}

double available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024.0;
  return -1;
}

void require_fits(const MemoryPlan& plan, double available) {
  if (available <= 0 || plan.peak_bytes() <= available) return;
  const PhaseMemory& big = plan.largest();
  throw_input_error("this request needs about ", format_bytes(plan.peak_bytes()),
                    " at its peak (phase '", big.phase, "': weights ",
                    format_bytes(big.weight_bytes), " + activations ",
                    format_bytes(big.activation_bytes), ") but only ", format_bytes(available),
                    " is available; use a smaller --size or fewer --frames, --precision bf16, "
                    "or --vae-tile (see --dry-run)");
}

}  // namespace vidax
