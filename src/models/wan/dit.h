// The Wan diffusion transformer (Wan 2.1 t2v / i2v, and the Wan 2.2 forward with per-token
// timesteps) on the CPU, with exactly the reference semantics (fixtures README section 6):
// zero-padded, unmasked text context; head modulated by `e`; float64 sinusoid and RoPE.
//
// Precision: the residual stream, modulation, norms, softmax statistics are f32 in both modes;
// kBF16 runs the GEMMs and attention on bf16 inputs (f32 accumulation), kFP32 runs everything in
// f32. Weights are packed once at load in the GEMM compute dtype.
//
// Thread-safety: forward() is not reentrant on one WanDit (it reuses scratch buffers); the work
// inside is parallelised with OpenMP.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/exec_context.h"
#include "core/tensor.h"
#include "io/comfy_fp8.h"  // Fp8Tensor
#include "models/wan/dit_config.h"

namespace vidax {
class PackedLinear;
}
namespace vidax::dist {
class Group;
}  // namespace vidax::dist

namespace vidax::sparse {
class AttentionPolicy;
struct AttentionDiagnostics;
struct PbsaOptions;
}  // namespace vidax::sparse

namespace vidax::wan {

class CausalKvCache;

enum class Precision { kFP32, kBF16 };
Precision parse_precision(const std::string& text, const std::string& flag);

// Receives named intermediates ("patch_tokens", "e", "e0", "context_emb", "clip_emb",
// "block<i>.self_attn_out", "block<i>.cross_attn_out", "block<i>.ffn_out", "block<i>.out",
// "block<i>.q_rope", "block<i>.k_rope", "head_out"), shaped as in the fixtures (batch dim 1).
using CaptureFn = std::function<void(const std::string& name, const Tensor& value)>;

// One sample of a forward call.
struct DitSample {
  Tensor x;         // [C_in, F, H, W] latent (for i2v: the noisy latent, 16 channels)
  Tensor y;         // i2v only: [C_y, F, H, W] conditioning, concatenated after x on channels
  Tensor clip_fea;  // i2v only: [1, 257, clip_dim] or [257, clip_dim]
  Tensor context;   // [L, text_dim], unpadded (L <= text_len)
  // Timestep: one value ([1]) or one per token ([>= tokens], Wan 2.2 form; entries beyond
  // the sample's tokens are ignored).
  Tensor t;
  int64_t seq_len = 0;  // the reference's seq_len argument; 0 = number of tokens
  // Where the call sits in a sampling loop, for attention policies (sparse/attention_policy.h).
  int64_t step = 0, steps = 1;
  int cfg_branch = 0;  // 0: conditional, 1: unconditional
  // A subset of the patch tokens (sorted, unique, each < L) to compute; the others are not
  // evaluated and their rows of the returned prediction are 0. Self-attention of the subset
  // attends to every token: fresh keys / values for the subset, the ones kept by the last call
  // of this CFG branch for the rest (set_kv_store). Null: every token.
  const std::vector<int64_t>* tokens = nullptr;
  // Causal rollout (Self-Forcing / CausVid; models/wan/causal_kv_cache.h): x is a chunk of
  // latent frames starting at latent frame `start_frame` of the video. Its RoPE frame positions
  // start there, its self-attention keys / values are written into `kv_cache` (appended, or
  // rewriting the chunk's rows when the cache already ends with them) and its queries attend to
  // every valid row of the cache (the earlier chunks' and its own). One process, or a tp mesh
  // (the cache then holds this rank's heads). Null: a plain forward.
  CausalKvCache* kv_cache = nullptr;
  int64_t start_frame = 0;
  // With kv_cache: Sparse Forcing's persistent block-sparse attention (sparse/pbsa.h) on this
  // call: the saliency of the cached blocks is measured and added to the cache, and each query
  // block attends to its share of the window's blocks. Null: dense over the whole cache.
  const sparse::PbsaOptions* pbsa = nullptr;
  // A plain forward with block-causal self-attention: the tokens form chunks of this many latent
  // frames and each chunk attends to itself and the chunks before it (what a rollout with an
  // unbounded cache computes, in one call). 0: bidirectional.
  int64_t causal_block_frames = 0;
};

// Looks up a weight by official name (dtype as stored; converted as needed).
using WeightFn = std::function<Tensor(const std::string& official_name)>;

// How much of the weights stays in memory. budget_bytes = 0: all of them, packed at load.
// Otherwise the packed weights this process holds stay under budget_bytes: the embeddings and
// head, as many whole blocks as fit beside a window of two streamed blocks (one in use, the
// next loaded by a background thread meanwhile; one when only one fits), and the remaining
// blocks read from `weights` again at every forward. Results are bitwise those of the resident
// model. A budget below the embeddings and head plus one block is an InputError.
struct WeightResidency {
  int64_t budget_bytes = 0;
  // When set, the blocks' linear weights stored as fp8 (F8_E4M3 / F8_E5M2, ComfyUI's scaled fp8
  // files) stay fp8 in memory, half of bf16 (kernels/cpu/gemm.h PackedLinear::kept), and with
  // fp32 compute those stored as fp16 may stay fp16 (half of f32): this gives the codes and
  // scale of such a weight (nullopt for one stored otherwise, which is converted as usual).
  // Unset: every weight is converted to the compute dtype at load (dit_checkpoint.h
  // kept_weight_loader builds it).
  std::function<std::optional<Fp8Tensor>(const std::string&)> fp8;
  // FSDP-style sharding (models/wan/dit_sharded.h): the ranks of this group each keep 1/size of
  // every block's checkpoint bytes, and each block is gathered (by the block loader's thread,
  // the only user of this group) into a window of two just before it is used, the next one
  // while the current one computes. Bitwise the resident model. Not with a budget or fp8 kept.
  std::shared_ptr<dist::Group> shard_group;
};

// What the streamed blocks cost: loads done so far, the time they took (on the loader thread)
// and the time forward() waited for them.
struct WeightStreamStats {
  int streamed_blocks = 0, pinned_blocks = 0, window = 0;
  int64_t loads = 0;  // blocks read (the loader's read-ahead included: timing decides it)
  int64_t uses = 0;   // streamed blocks handed to the forwards (one read each when streaming)
  double load_seconds = 0, wait_seconds = 0;
};

// A hook on the block stack, for step methods that reuse it across steps (TeaCache, MagCache;
// accel/). Each forward() asks it, after the time embedding, whether the blocks run. When they
// run and the hook is set, the DiT keeps their residual blocks(x) - x (this rank's rows, one
// [rows, dim] f32 buffer per CFG branch); when they do not, it adds that residual to x instead
// and goes on to the head, exactly the reference scripts' `x += previous_residual`.
class BlockStackHook {
 public:
  virtual ~BlockStackHook() = default;
  // e: the time embedding [unique_t, dim] (time_embedding output), e0: its projection
  // [unique_t, 6 dim] (unique_t = 1 for one timestep). Called once per forward on every rank
  // of a mesh with the same values; it must give the same answer on each. Returning false
  // before any forward of that CFG branch ran the blocks is an internal error.
  virtual bool run_blocks(const DitSample& sample, std::span<const float> e,
                          std::span<const float> e0) = 0;
  // After the blocks ran: their residual blocks(x) - x, [rows, dim] (this rank's rows), for
  // calibration (MagCache's magnitude ratios).
  virtual void after_blocks(const DitSample& sample, std::span<const float> residual, int64_t rows,
                            int64_t dim) {
    (void)sample, (void)residual, (void)rows, (void)dim;
  }
};

// The linears of a block a LinearHook sees.
enum class LinearSite : int { kQkv = 0, kO, kCrossQ, kCrossO, kFfnIn, kFfnOut };
inline constexpr int kLinearSites = 6;
const char* linear_site_name(LinearSite site);  // "qkv", "o", "cross_q", "cross_o", "ffn_in", ...

// One call of a block linear: y = epilogue(x . W^T + b) on `rows` rows of this rank.
struct LinearCall {
  int64_t step = 0;
  int cfg_branch = 0;
  int layer = 0;
  LinearSite site = LinearSite::kQkv;
  const PackedLinear* linear = nullptr;
  const void* x = nullptr;  // [rows, K]: bf16 when x_bf16, else f32
  bool x_bf16 = false;
  int64_t rows = 0;
  float* y = nullptr;       // [rows, N] f32 output, or
  BFloat16* y16 = nullptr;  // [rows, N] bf16 output (exactly one of the two is set)
};

// A hook on the block linears, for step methods that reuse partial products across steps
// (Kaleido, accel/kaleido.h): forward() either computes the call's output itself (true) or
// leaves it to the linear (false). Whole forwards only (not with token subsets).
class LinearHook {
 public:
  virtual ~LinearHook() = default;
  virtual bool forward(const LinearCall& call) = 0;
};

class WanDit {
 public:
  // `ctx` as set_context's; under a mesh with tensor parallelism (tp > 1) this rank reads and
  // packs only its tp shard of every block's weights (nn/linear.h), and the context given to
  // set_context later must have the same tp rank and size.
  // With a weights budget (`residency`), `weights` is called again during forward() from a
  // loader thread: what it reads must outlive the model (see io/checkpoint.h's loader()).
  WanDit(const DitConfig& config, const WeightFn& weights, Precision precision,
         const ExecContext& ctx = {}, const WeightResidency& residency = {});
  ~WanDit();
  WanDit(WanDit&&) noexcept;
  WanDit& operator=(WanDit&&) noexcept;

  const DitConfig& config() const;
  Precision precision() const;
  // Bytes held in packed/converted weights (with a budget: at most, the streamed window full).
  size_t weight_bytes() const;
  WeightStreamStats weight_stream_stats() const;
  // One block's packed weight bytes under tensor parallelism `tp` (from the shapes);
  // `kept_item_bytes`: its linears kept as stored at that many bytes per weight (1: fp8,
  // 2: fp16 with fp32 compute); 0: packed in the compute dtype.
  static double block_weight_bytes(const DitConfig& config, Precision precision, int tp = 1,
                                   int kept_item_bytes = 0);

  // Self-attention policy for the following forward calls (sparse/attention_policy.h); null
  // (the default) or a plan whose groups are all dense runs the dense path unchanged. With
  // `diagnostics`, every self-attention call also runs dense attention and appends a record
  // (error vs dense, recall; sparse/sparse_attention.h). Both must outlive the forward calls.
  void set_attention(std::shared_ptr<sparse::AttentionPolicy> policy,
                     sparse::AttentionDiagnostics* diagnostics = nullptr);

  // The block-stack hook for the following forward calls (null: the blocks always run, and no
  // residual is kept). Setting it drops the residuals kept so far.
  void set_block_hook(std::shared_ptr<BlockStackHook> hook);
  // The block-linear hook for the following forward calls (null: the linears run as usual).
  void set_linear_hook(std::shared_ptr<LinearHook> hook);

  // Keep every layer's self-attention keys and values (post-RoPE, per CFG branch, all L tokens;
  // bf16 in bf16 mode) so that a later forward over a token subset (DitSample::tokens) attends
  // to the whole sequence: heterogeneous step allocation (accel/hsa.h). Each call refreshes the
  // rows it computes. Costs 2 x layers x L x dim values per branch. Single process or a cfg
  // mesh only (sequence or tensor parallel meshes are refused). Off drops the stores.
  void set_kv_store(bool on);

  // How the following forward calls run (core/exec_context.h). With a mesh whose sequence-
  // parallel group (ring x ulysses) has several ranks, every rank of that group must call
  // forward() with the same sample: each computes its share of the tokens and every rank
  // returns the whole prediction. The mesh must outlive the calls; its heads divisibility is
  // checked by dist::validate_mesh_for_model before the run. The ranks of its tp group must
  // likewise call forward() together (they hold the same rows and different heads).
  void set_context(const ExecContext& ctx);

  // Returns the flow prediction [C_out, F, H, W]. Throws InputError on bad shapes.
  Tensor forward(const DitSample& sample, const CaptureFn& capture = nullptr);

  // Bytes of scratch activations one forward over `tokens` tokens allocates (upper estimate).
  static double activation_bytes(const DitConfig& config, int64_t tokens);

  // Multiply-add FLOPs x 2 of one forward over `tokens` tokens (used by benchmarks).
  static double forward_flops(const DitConfig& config, int64_t tokens);
  // The part of forward_flops spent in the block stack (what a BlockStackHook skips).
  static double block_stack_flops(const DitConfig& config, int64_t tokens);
  // FLOPs of a forward over `active` of `tokens` tokens (DitSample::tokens): every per-token op
  // on the active rows, self-attention of the active queries over all keys.
  static double subset_flops(const DitConfig& config, int64_t tokens, int64_t active);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vidax::wan
