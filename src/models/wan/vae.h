// The Wan video VAE (Wan 2.1 and Wan 2.2) on the CPU, numerically following the official
// `WanVAE_.encode` / `decode` (fixtures README 5.5, 5.6 and 6):
//  - encode runs the encoder on frame 0 alone, then on chunks of 4 frames, each causal conv
//    carrying the last 2 input frames of the previous chunk (CACHE_T = 2), the temporal
//    downsamplers carrying 1; returns (mu - mean) * inv_std.
//  - decode applies the post-quant conv to z / inv_std + mean and runs the decoder one latent
//    frame at a time (1 frame for the first, 4 for each further latent frame). Output frames
//    are handed to a sink as soon as they exist: after each temporal upsampler the frames are
//    pushed through the rest of the decoder one by one (exact, the layers are causal), so the
//    decode state is the weights, ~2 frames of carried input per causal conv and one frame of
//    activations, independent of the clip length.
//
// Activations are channels-last [T, H, W, C] f32 inside. Precision kFP32 runs every conv in
// f32; kBF16 runs the 3-D/2-D convs on bf16 inputs and weights with f32 accumulation (carried
// frames are then stored in bf16 too, halving the cache), while norms, attention, residual
// adds and the latent statistics stay f32.
//
// Thread-safety: encode()/decode() are not reentrant on one WanVae (they use the per-layer
// caches); the work inside is parallelised with OpenMP.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "models/wan/dit.h"  // Precision, WeightFn, CaptureFn
#include "models/wan/vae_config.h"

namespace vidax::dist {
class Group;
}

namespace vidax::wan {

// Receives [3, n, H, W] F32 RAW (unclamped) frames, in order.
using FrameSink = std::function<void(const Tensor& frames)>;

// Spatial tiling of decode, in latent pixels (0 = no tiling along that axis). Tiles overlap by
// `overlap` latent pixels and are blended linearly across the overlap. Every tile keeps its
// own causal caches, so tiled decode still streams frame by frame; it lowers the peak of the
// per-frame activations (and the tile-local oneDNN work), not the caches.
struct VaeDecodeOptions {
  int64_t tile_h = 0, tile_w = 0, overlap = 0;
  // Tiled decode across processes: tile k is decoded by rank k % size of this group, the
  // decoded tiles are exchanged after every latent frame, and every rank blends them in the
  // single-process order, so every rank's frames equal one process's tiled decode bit for bit.
  // Every rank of the group must call decode() with the same latent. Null: this process alone.
  dist::Group* group = nullptr;
  // Streaming across calls (a causal rollout decodes each chunk as it is made): `continues`:
  // this latent follows the previous call's (its first frame is not the clip's first, so it
  // gives temporal_stride frames, and the causal caches carry over); `more_follows`: keep the
  // caches for a following continued call. Decoding a clip in pieces this way gives the frames
  // of one call over the whole latent (the decoder is causal and runs frame by frame anyway).
  bool continues = false, more_follows = false;
};

// Which halves to load: a text-to-video pipeline only decodes, image-to-video also encodes.
enum class VaeParts { kBoth, kEncoder, kDecoder };

class WanVae {
 public:
  // Only the weights of `parts` are requested from `weights`; encode() / decode() on a missing
  // half throw InputError.
  WanVae(const VaeConfig& config, const WeightFn& weights, Precision precision,
         VaeParts parts = VaeParts::kBoth);
  ~WanVae();
  WanVae(WanVae&&) noexcept;
  WanVae& operator=(WanVae&&) noexcept;

  const VaeConfig& config() const;
  Precision precision() const;
  size_t weight_bytes() const;  // bytes held by the converted / packed weights

  // Overrides the latent statistics (z_dim entries each); inv_std is used as given (decode
  // divides by it, as the reference does).
  void set_latent_stats(const std::vector<float>& mean, const std::vector<float>& inv_std);

  // video [3, T, H, W] (or [1, 3, T, H, W]) float in [-1, 1], T = 4k+1, H and W multiples of
  // the spatial stride -> normalised mu [z, 1 + (T-1)/4, H/s, W/s]. capture gets "enc_out",
  // "mu_raw", "log_var" (batch dim 1, as in the fixtures).
  Tensor encode(const Tensor& video, const CaptureFn& capture = nullptr);

  // latent [z, F, h, w] (or [1, z, F, h, w]) -> frames [3, n, h*s, w*s] to `sink`: 1 frame for
  // the first latent frame, temporal_stride for each further one. capture gets
  // "dec_post_quant_out".
  void decode(const Tensor& latent, const FrameSink& sink, const VaeDecodeOptions& options = {},
              const CaptureFn& capture = nullptr);
  // Convenience: the whole clip [3, 1 + 4 (F-1), H, W].
  Tensor decode(const Tensor& latent, const VaeDecodeOptions& options = {});

  // Memory estimates for planning (bytes): converted weights; peak of a streaming decode (or
  // encode) at the given output size, weights included.
  static int64_t weight_bytes(const VaeConfig& config, Precision precision,
                              VaeParts parts = VaeParts::kBoth);
  static int64_t decode_peak_bytes(const VaeConfig& config, int64_t height, int64_t width,
                                   Precision precision, const VaeDecodeOptions& options = {},
                                   VaeParts parts = VaeParts::kDecoder);
  static int64_t encode_peak_bytes(const VaeConfig& config, int64_t height, int64_t width,
                                   Precision precision, VaeParts parts = VaeParts::kEncoder);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace vidax::wan
