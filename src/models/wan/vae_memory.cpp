// Memory estimates of the Wan VAE for planners (`vidax generate --dry-run`), derived by walking
// the same architecture description the model is built from. What they count:
//  - weights: conv kernels with spatial/temporal extent in the compute dtype, 1x1 convs, norms
//    and biases in f32, of the halves loaded (VaeParts);
//  - carried state per causal conv, at the resolution the layer runs at: kT - 1 = 2 input
//    frames (compute dtype), or 2 frames of f32 partial outputs where the conv carries partial
//    sums (the heads; same rule as CausalConv); one frame per temporal downsampler;
//  - activations: the largest set alive at once inside a residual block (input, the new frames
//    appended to the carried window, conv output, residual) or head at each resolution, plus
//    the multi-frame parents the decoder keeps while it continues frame by frame, plus one
//    decoded chunk;
//  - where BF16 convolutions run widened (no oneDNN bf16 convolution on this machine,
//    nn/conv3d.h): spatial kernels held in f32, and each conv call's f32 copy of its input
//    window, alive while that conv runs;
//  - a fixed allowance for the runtime (code, oneDNN's shared scratchpad and JIT kernels,
//    attention scratch, allocator slack), measured at 832x480.
#include <algorithm>

#include "models/wan/vae.h"
#include "models/wan/vae_impl.h"
#include "models/wan/vae_tensors.h"
#include "nn/conv3d.h"

namespace vidax::wan {
namespace {

constexpr int64_t kRuntimeBytes = int64_t{160} << 20;

int64_t item_of(Precision p) { return p == Precision::kBF16 ? 2 : 4; }

bool widened(Precision p) { return p == Precision::kBF16 && conv3d_widens_bf16(); }

// Bytes per input element of the f32 copy a widened conv makes (0 where it makes none).
int64_t widen_copy_item(Precision p) { return widened(p) ? 4 : 0; }

}  // namespace

int64_t WanVae::weight_bytes(const VaeConfig& config, Precision precision, VaeParts parts) {
  int64_t n = 0;
  for (const auto& d : vae_tensor_decls(config)) {
    const bool dec = d.name.rfind("decoder.", 0) == 0 || d.name.rfind("conv2.", 0) == 0;
    if ((parts == VaeParts::kEncoder && dec) || (parts == VaeParts::kDecoder && !dec)) continue;
    const bool spatial =
        d.role == TensorRole::kConvWeight && d.shape.numel() / d.shape[0] / d.shape[1] > 1;
    n += d.shape.numel() * (spatial && !widened(precision) ? item_of(precision) : 4);
  }
  return n;
}

int64_t WanVae::decode_peak_bytes(const VaeConfig& config, int64_t height, int64_t width,
                                  Precision precision, const VaeDecodeOptions& options,
                                  VaeParts parts) {
  const VaeArchitecture a = vae_architecture(config);
  const int64_t item = item_of(precision);
  const int64_t wide = widen_copy_item(precision);
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
  auto conv_cache = [&](int64_t cin, int64_t cout) {
    cache +=
        2 * px * (causal_conv_carries_partial_sums(3, cin, cout, item) ? cout * 4 : cin * item);
  };
  auto block_peak = [&](int64_t cin, int64_t cout, bool shortcut) {
    // conv1: the block input, the new frame behind conv1's carried ones, conv1's output; the
    // shortcut output (if any) while the input still exists; conv2: conv1's output while it is
    // staged, the new frame, and the residual that conv2 accumulates into (the input itself
    // without a shortcut). A widened conv adds the f32 copy of its 3-frame window.
    const int64_t phase1 = cin * 4 + cin * item + cout * 4 + 3 * cin * wide;
    const int64_t phase_sc = shortcut ? cin * 4 + 2 * cout * 4 : 0;
    const int64_t phase2 = 2 * cout * 4 + cout * item + 3 * cout * wide;
    act = std::max(act, px * std::max({phase1, phase_sc, phase2}));
  };
  auto res = [&](int64_t cin, int64_t cout) {
    conv_cache(cin, cout);
    conv_cache(cout, cout);
    block_peak(cin, cout, cin != cout);
  };
  conv_cache(config.z_dim, a.dec_top);
  res(a.dec_top, a.dec_top);
  res(a.dec_top, a.dec_top);
  act = std::max(act, px * a.dec_top * 4 * 7);  // attention: x, norm, qkv (3C), att, out
  int64_t frames = 1;  // frames a level holds for one latent frame (before splitting)
  for (const auto& s : a.decoder) {
    for (const auto& r : s.res) res(r.in, r.out);
    const auto& rs = s.resample;
    if (rs.mode == VaeResampleMode::kUp3d) {
      conv_cache(rs.dim, 2 * rs.dim);
      frames = 2;
      // time conv: its input, the new frame in its window, its output (2C); then the output and
      // the frames interleaved from it
      act = std::max(act,
                     px * std::max(rs.dim * 4 + rs.dim * item + 2 * rs.dim * 4 + 3 * rs.dim * wide,
                                   rs.dim * 4 + 2 * rs.dim * 4 + 2 * rs.dim * 4));
    }
    if (rs.mode == VaeResampleMode::kUp2d || rs.mode == VaeResampleMode::kUp3d) {
      // per frame: input + its converted copy; that + the 2x upsampled copy (compute dtype);
      // the upsampled copy (and its widened copy) + the conv output (f32)
      act = std::max(act, frames * px *
                              std::max({rs.dim * 4 + rs.dim * item, 5 * rs.dim * item,
                                        4 * rs.dim * (item + wide) + 4 * rs.out_dim * 4}));
      px *= 4;
      if (frames > 1) parents += (frames - 1) * px * rs.out_dim * 4;  // waiting to continue
      frames = 1;
    }
  }
  // Head: its input, the input in the compute dtype, the per-tap outputs (or the plain output).
  const int64_t head_out = config.io_channels();
  conv_cache(a.dec_out, head_out);
  act = std::max(act,
                 px * (a.dec_out * 4 + a.dec_out * item + 3 * head_out * 4 + 3 * a.dec_out * wide));
  const int64_t chunk_out = 3 * config.temporal_stride() * height * width * 4 * 2;
  const int64_t cached = cache * nh * nw;
  return weight_bytes(config, precision, parts) + cached + act + parents + chunk_out +
         kRuntimeBytes;
}

int64_t WanVae::encode_peak_bytes(const VaeConfig& config, int64_t height, int64_t width,
                                  Precision precision, VaeParts parts) {
  const VaeArchitecture a = vae_architecture(config);
  const int64_t item = item_of(precision);
  const int64_t wide = widen_copy_item(precision);
  const int64_t p = config.patch();
  int64_t px = (height / p) * (width / p);
  int64_t t = config.temporal_stride();  // frames per chunk at the current level
  int64_t cache = 0, act = 0;
  auto res = [&](int64_t cin, int64_t cout) {
    cache += 2 * px * (cin + cout) * item;
    // As in decode_peak_bytes, for a chunk of t frames (a widened conv copies its t + 2 frame
    // window).
    act = std::max({act, px * t * (cin * 4 + cin * item + cout * 4) + px * (t + 2) * cin * wide,
                    px * t * (cin != cout ? cin * 4 + 2 * cout * 4 : 0),
                    px * t * (2 * cout * 4 + cout * item) + px * (t + 2) * cout * wide});
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
  const int64_t head_out = 2 * config.z_dim;
  cache += 2 * px *
           (causal_conv_carries_partial_sums(3, a.enc_top, head_out, item) ? head_out * 4
                                                                           : a.enc_top * item);
  return weight_bytes(config, precision, parts) + cache + act + kRuntimeBytes;
}

}  // namespace vidax::wan
