// Memory estimates of the Wan VAE for planners (`vidax generate --dry-run`), derived by walking
// the same architecture description the model is built from. What they count:
//  - weights: conv kernels with spatial/temporal extent in the compute dtype, 1x1 convs, norms
//    and biases in f32, of the halves loaded (VaeParts);
//  - carried frames: kT - 1 = 2 input frames per causal conv (compute dtype) and one frame per
//    temporal downsampler, at the resolution the layer runs at;
//  - activations: the largest set alive at once inside a residual block (input, staging with
//    the carried frames, two outputs) at each resolution, plus the multi-frame parents the
//    decoder keeps while it continues frame by frame, plus one decoded chunk;
//  - a fixed allowance for the runtime (oneDNN scratchpads, code, allocator slack).
#include <algorithm>

#include "models/wan/vae.h"
#include "models/wan/vae_tensors.h"

namespace vidax::wan {
namespace {

constexpr int64_t kRuntimeBytes = int64_t{160} << 20;

int64_t item_of(Precision p) { return p == Precision::kBF16 ? 2 : 4; }

}  // namespace

int64_t WanVae::weight_bytes(const VaeConfig& config, Precision precision, VaeParts parts) {
  int64_t n = 0;
  for (const auto& d : vae_tensor_decls(config)) {
    const bool dec = d.name.rfind("decoder.", 0) == 0 || d.name.rfind("conv2.", 0) == 0;
    if ((parts == VaeParts::kEncoder && dec) || (parts == VaeParts::kDecoder && !dec)) continue;
    const bool spatial =
        d.role == TensorRole::kConvWeight && d.shape.numel() / d.shape[0] / d.shape[1] > 1;
    n += d.shape.numel() * (spatial ? item_of(precision) : 4);
  }
  return n;
}

int64_t WanVae::decode_peak_bytes(const VaeConfig& config, int64_t height, int64_t width,
                                  Precision precision, const VaeDecodeOptions& options,
                                  VaeParts parts) {
  const VaeArchitecture a = vae_architecture(config);
  const int64_t item = item_of(precision);
  const int64_t ss = config.spatial_stride();
  const int64_t lh = height / ss, lw = width / ss;
  // Every tile keeps its own carried frames (all tiles together cover the frame plus the
  // overlaps); activations shrink to one tile.
  auto tiles = [&](int64_t total, int64_t tile) {
    if (tile <= 0 || tile >= total) return std::pair<int64_t, int64_t>{1, total};
    const int64_t stride = std::max<int64_t>(1, tile - options.overlap);
    return std::pair<int64_t, int64_t>{(total - tile + stride - 1) / stride + 1, tile};
  };
  const auto [nh, th] = tiles(lh, options.tile_h);
  const auto [nw, tw] = tiles(lw, options.tile_w);
  int64_t cache = 0, act = 0, parents = 0;
  int64_t px = th * tw;  // pixels of one frame at the current decoder level (one tile)
  auto conv_cache = [&](int64_t cin) { cache += 2 * px * cin * item; };
  auto block_peak = [&](int64_t cin, int64_t cout) {
    // The block input stays alive throughout; conv1: staging (3 frames, compute) + output;
    // conv2: its input is freed once staged, then staging + output; then the shortcut output.
    const int64_t phase =
        std::max({3 * cin * item + cout * 4, 3 * cout * item + cout * 4, 2 * cout * 4});
    act = std::max(act, px * (cin * 4 + phase));
  };
  auto res = [&](int64_t cin, int64_t cout) {
    conv_cache(cin);
    conv_cache(cout);
    block_peak(cin, cout);
  };
  conv_cache(config.z_dim);
  res(a.dec_top, a.dec_top);
  res(a.dec_top, a.dec_top);
  act = std::max(act, px * a.dec_top * 4 * 6);  // attention: x, norm, qkv (3C), out
  int64_t frames = 1;  // frames a level holds for one latent frame (before splitting)
  for (const auto& s : a.decoder) {
    for (const auto& r : s.res) res(r.in, r.out);
    const auto& rs = s.resample;
    if (rs.mode == VaeResampleMode::kUp3d) {
      conv_cache(rs.dim);
      frames = 2;
    }
    if (rs.mode == VaeResampleMode::kUp2d || rs.mode == VaeResampleMode::kUp3d) {
      // time conv output (2C) and its interleaved frames; then per frame: the converted input,
      // its 2x upsampled copy (compute dtype) and the conv output (f32)
      act =
          std::max(act, px * rs.dim * 4 * 4 +
                            frames * px * (rs.dim * item + 4 * rs.dim * item + 4 * rs.out_dim * 4));
      px *= 4;
      if (frames > 1) parents += (frames - 1) * px * rs.out_dim * 4;  // waiting to continue
      frames = 1;
    }
  }
  conv_cache(a.dec_out);
  block_peak(a.dec_out, config.io_channels());
  const int64_t chunk_out = 3 * config.temporal_stride() * height * width * 4 * 2;
  const int64_t cached = cache * nh * nw;
  return weight_bytes(config, precision, parts) + cached + act + parents + chunk_out +
         kRuntimeBytes;
}

int64_t WanVae::encode_peak_bytes(const VaeConfig& config, int64_t height, int64_t width,
                                  Precision precision, VaeParts parts) {
  const VaeArchitecture a = vae_architecture(config);
  const int64_t item = item_of(precision);
  const int64_t p = config.patch();
  int64_t px = (height / p) * (width / p);
  int64_t t = config.temporal_stride();  // frames per chunk at the current level
  int64_t cache = 0, act = 0;
  auto res = [&](int64_t cin, int64_t cout) {
    cache += 2 * px * (cin + cout) * item;
    act = std::max(
        act, px * t * (cin * 4 + cin * item) + px * (t + 2) * cin * item + 2 * px * t * cout * 4);
  };
  cache += 2 * px * config.io_channels() * item;
  act = std::max(act, px * t * config.io_channels() * 4 * 2 + px * t * config.dim * 4);
  for (const auto& s : a.encoder) {
    for (const auto& r : s.res) res(r.in, r.out);
    if (s.resample.mode == VaeResampleMode::kDown2d ||
        s.resample.mode == VaeResampleMode::kDown3d) {
      px /= 4;
      cache += px * s.resample.dim * item;
      if (s.resample.mode == VaeResampleMode::kDown3d) t = std::max<int64_t>(1, t / 2);
    }
  }
  res(a.enc_top, a.enc_top);
  res(a.enc_top, a.enc_top);
  return weight_bytes(config, precision, parts) + cache + act + kRuntimeBytes;
}

}  // namespace vidax::wan
