// Autoregressive rollout of a causal Wan DiT (Self-Forcing, CausVid; docs/rollout.md), as the
// public Self-Forcing inference (`CausalInferencePipeline.inference`) runs it:
//
//   for each chunk of `chunk_frames` latent frames starting at frame f0:
//     x = the chunk's frames of the initial noise
//     for each denoising step k:  flow = DiT(x, t_k; cache, f0)
//                                 x0 = x - sigma_k flow                     (double)
//                                 x = (1 - sigma_{k+1}) x0 + sigma_{k+1} eps_k (not after the last)
//     the chunk's latent is the last x0
//     clean pass: DiT(x0, t = context_noise; cache, f0) rewrites the chunk's cached keys/values
//
// No classifier-free guidance (it was distilled in). Noise is what the reference's CPU
// generator gives after torch.manual_seed(seed): the initial noise torch.randn([1, F, C, H, W])
// (frame-major), then one torch.randn_like([n, C, H, W]) per chunk and step but the last, all
// from the same stream (sampling/torch_randn.h TorchGenerator). The initial noise is drawn chunk
// by chunk as the rollout reaches it (the same numbers), so memory does not grow with length.
//
// The key/value cache (models/wan/causal_kv_cache.h) is global (the reference's default) while
// the video fits the reference's 32,760-token cache (21 latent frames at 832x480); a longer video,
// or any video with local_attn_frames set, rolls: sink frames plus the most recent frames.
//
// Not thread-safe; drives the DiT on the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/tensor.h"
#include "models/wan/causal_kv_cache.h"
#include "models/wan/dit.h"
#include "sampling/rollout_schedule.h"
#include "sampling/torch_randn.h"
#include "sparse/pbsa.h"

namespace vidax {

// The reference's global cache: 32,760 tokens (21 frames of 1,560 tokens at 832x480).
inline constexpr int64_t kReferenceCacheTokens = 32760;

struct RolloutOptions {
  RolloutScheduleOptions schedule;  // Self-Forcing DMD by default
  int64_t chunk_frames = 3;         // latent frames per chunk (num_frame_per_block)
  double context_noise = 0;         // the clean pass's timestep
  // Rolling cache (the reference's local_attn_size / sink_size, latent frames): -1 = global while
  // the video fits kReferenceCacheTokens, else a window of that many frames.
  int64_t local_attn_frames = -1;
  int64_t sink_frames = -1;  // -1: 0 with an explicit window, chunk_frames with the default one
  bool clean_pass_last_chunk = true;  // inference.py runs it (demo.py does not); no effect
  // Sparse Forcing's persistent block-sparse attention (sparse/pbsa.h): its window, sink and
  // persistent room set the cache (local_attn_frames / sink_frames must stay -1). Unset: dense.
  std::optional<sparse::PbsaOptions> pbsa;
  uint64_t seed = 0;
};

// What the rollout resolved: the cache it uses.
struct RolloutPlan {
  int64_t chunks = 0, frame_tokens = 0;
  bool rolling = false;
  int64_t cache_frames = 0, sink_frames = 0;
  int64_t persistent_tokens = 0;  // PBSA: rows of persistent blocks
  RolloutSchedule schedule;
};

// Resolves the options for a latent of `frames` frames of `frame_tokens` tokens: InputError
// naming the option when the chunk size does not divide the frames, or the window cannot hold
// the sink and one chunk.
RolloutPlan plan_rollout(const RolloutOptions& options, int64_t frames, int64_t frame_tokens);

// Named tensors of one chunk for tests: "step<k>.t", "step<k>.flow", "step<k>.x0",
// "step<k>.noise" (the eps drawn after step k), "x0"; [C, n, H, W] layout.
using RolloutCapture =
    std::function<void(int64_t chunk, const std::string& name, const Tensor& value)>;

class CausalRollout {
 public:
  // latent_shape: [C, F, H, W] of the whole video; context: [L, text_dim] text features. The
  // DiT must outlive the rollout.
  CausalRollout(wan::WanDit& dit, const Tensor& context, const Shape& latent_shape,
                const RolloutOptions& options);
  const RolloutPlan& plan() const { return plan_; }
  int64_t chunks() const { return plan_.chunks; }
  int64_t next_chunk() const { return next_; }
  bool done() const { return next_ >= plan_.chunks; }
  // Denoises the next chunk and writes its clean keys/values: its latent [C, n, H, W].
  Tensor step(const RolloutCapture& capture = nullptr);
  // Polled before every DiT call of step(): when it returns true, step() throws Cancelled
  // (the chunk is abandoned; the chunks returned before are complete).
  void set_cancel(std::function<bool()> cancelled) { cancelled_ = std::move(cancelled); }
  const wan::CausalKvCache& cache() const { return *cache_; }
  // DiT calls of the chunks step() returned (an abandoned chunk's are not counted).
  int64_t dit_calls() const { return dit_calls_; }

 private:
  Tensor chunk_noise(TorchGenerator& gen, int64_t frames);  // [C, n, H, W] of a frame-major draw
  Tensor step_chunk(const RolloutCapture& capture);
  wan::WanDit& dit_;
  Tensor context_;
  Shape shape_;
  RolloutOptions opt_;
  RolloutPlan plan_;
  std::unique_ptr<wan::CausalKvCache> cache_;
  TorchGenerator init_gen_, step_gen_;
  Tensor whole_noise_;  // the initial noise when it cannot be drawn chunk by chunk
  std::function<bool()> cancelled_;
  bool failed_ = false;  // a step() threw: the cache and the noise streams are mid-chunk
  int64_t next_ = 0, dit_calls_ = 0;
};

}  // namespace vidax
