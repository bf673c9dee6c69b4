// Private to the Wan DiT implementation (dit.cpp, dit_block.cpp): the packed weights and the
// per-forward working state shared by the embedding, block and head code.
#pragma once

#include <array>
#include <vector>

#include "core/buffer.h"
#include "core/exec_context.h"
#include "core/prefetch_stream.h"
#include "dist/sequence_parallel.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/rope3d.h"
#include "models/wan/causal_kv_cache.h"
#include "models/wan/dit.h"
#include "models/wan/dit_sharded.h"
#include "nn/linear.h"
#include "sparse/attention_policy.h"
#include "sparse/pbsa.h"
#include "sparse/self_attention_op.h"

namespace vidax::wan {

// Column-split linears produce head (or hidden) slices, row-split ones partial sums (nn/linear.h).
struct DitBlockWeights {
  Linear qkv;                         // self-attention q, k, v fused: [3*dim, dim], column split
  Linear o;                           // row split
  std::vector<float> norm_q, norm_k;  // [dim] each (empty when qk_norm is off)
  Linear cross_q, cross_kv, cross_o;  // cross_kv: k and v fused [2*dim, dim]
  std::vector<float> cross_norm_q, cross_norm_k;
  Linear cross_kv_img;  // i2v: k_img and v_img fused
  std::vector<float> cross_norm_k_img;
  std::vector<float> norm3_weight, norm3_bias;  // empty when cross_attn_norm is off
  Linear ffn_in;                                // GELU(tanh) fused, column split
  Linear ffn_out;                               // row split
  std::vector<float> modulation;                // [6 * dim]
  size_t bytes() const;                         // held in packed weights and vectors
};

// Cross-attention keys and values of every block for one text context (and, for i2v, one set
// of CLIP features). They depend only on those inputs and the weights, and a denoising loop
// repeats the same two contexts (conditional, unconditional) at every step, so they are kept:
// [layers] x [context rows, 2 * dim] (k | v after the RMSNorm), in the dtype attention reads.
struct CrossKvEntry {
  bool valid = false;
  uint64_t last_use = 0;
  std::vector<float> context_key, clip_key;  // the inputs they were computed for (compared exactly)
  std::vector<Buffer<float>> text, image;    // fp32 runs
  std::vector<Buffer<BFloat16>> text16, image16;  // bf16 runs
  std::vector<uint8_t> text_done, image_done;     // per block: computed for this entry
};

// Tokens that share a timestep form runs; modulation vectors are per run.
struct TimestepRun {
  int64_t begin, count, index;  // token range, index into the unique timesteps
};

// Working state of one forward call.
struct DitState {
  int64_t tokens = 0;  // L (the whole sequence)
  // The rows this process holds (all L in one process; ceil(L / sp) under a sequence-parallel
  // mesh, padding rows at the end of the last ranks). Every per-row op runs on shard.per_rank
  // rows; `runs` index those local rows.
  SeqShard shard;
  std::array<int64_t, 3> grid{};  // (F2, H2, W2)
  std::vector<TimestepRun> runs;
  int64_t unique_t = 0;
  std::vector<float> e;   // [unique_t, dim]     time embedding
  std::vector<float> e0;  // [unique_t, 6 * dim] time projection
  // [context_rows, dim] embedded text context: the real rows, then (when the text is shorter
  // than text_len) one padding row that stands for all text_len - n of them.
  Buffer<float> context;
  int64_t context_rows = 0;
  // Rows the last context row stands for: text_len - n (the padding), or 1 when n == text_len.
  int64_t context_last_repeat = 1;
  Buffer<float> clip;  // [clip_tokens, dim] (i2v)
  int64_t clip_rows = 0;
  const CaptureFn* capture = nullptr;
  CrossKvEntry* cross_kv = nullptr;  // this call's cached cross-attention keys / values
  // A token subset (DitSample::tokens): the rows held are these tokens, in order.
  const std::vector<int64_t>* active = nullptr;
  // For attention policies: the sample's loop position and its (first) timestep.
  int64_t step = 0, steps = 1;
  int cfg_branch = 0;
  double timestep = 0;
  // Causal calls (DitSample::kv_cache): the cache, this call's slot in it, and the absolute token
  // index of row 0 (RoPE positions). Block-causal plain calls: tokens per chunk (0: off).
  CausalKvCache* kv_cache = nullptr;
  KvCacheSlot slot;
  int64_t causal_first_token = 0;
  int64_t block_causal_tokens = 0;
  const sparse::PbsaOptions* pbsa = nullptr;
  std::vector<double> key_mass;  // PBSA: attention mass per cache row, summed over layers
};

struct WanDit::Impl {
  ~Impl() { blocks.reset(); }  // the loader thread reads the fields below: it ends first
  DitConfig cfg;
  Precision precision = Precision::kBF16;
  DType compute = DType::kBF16;
  PackedLinear patch_embedding;                // [dim, C*pt*ph*pw]
  PackedLinear text0, text2;                   // text0 has GELU(tanh) fused
  PackedLinear time0, time2, time_projection;  // always f32 (the reference forces f32 here)
  // The blocks' weights: all resident, or some streamed from `weights_fn` (core/prefetch_stream.h).
  WeightFn weights_fn;                     // kept when blocks are streamed
  std::unique_ptr<ShardedBlocks> sharded;  // WeightResidency::shard_group: this rank's chunks
  std::function<std::optional<Fp8Tensor>(const std::string&)> fp8_fn;  // WeightResidency::fp8
  double block_bytes_estimate = 0;  // one block's packed bytes, from the shapes
  std::unique_ptr<PrefetchStream<DitBlockWeights>> blocks;
  PackedLinear head;
  std::vector<float> head_modulation;  // [2 * dim]
  // i2v image projection (MLPProj): LN -> Linear -> GELU(erf) -> Linear -> LN, eps 1e-5.
  std::vector<float> img_ln0_w, img_ln0_b, img_ln4_w, img_ln4_b;
  std::vector<float> img_emb_pos;  // FLF2V: [flf_pos_tokens, clip_dim]
  PackedLinear img1, img3;
  Rope3dTable rope;
  ExecContext ctx;                             // threads, profiler, mesh
  TpShard tp;                                  // this rank's tensor-parallel shard of the blocks
  sparse::SelfAttentionOp self_attn;           // the attention core: a policy's plan, or dense
  SeqParallelWorkspace sp_ws;                  // the sequence-parallel exchanges' buffers
  std::array<CrossKvEntry, 2> cross_kv_cache;  // the two contexts of a guided loop, LRU
  uint64_t cross_kv_clock = 0;
  CrossKvEntry& cross_kv_entry(const Tensor& context, const Tensor& clip);
  Buffer<float> sp_f32_heads;  // bf16 + policy under Ulysses: the f32 q|k|v exchanged

  // Scratch reused across blocks and calls.
  Buffer<float> x, act, qkv, attn, tmp, hidden, kv;
  // Block-stack hook (dit.h BlockStackHook) and the residual blocks(x) - x it reuses, one per
  // CFG branch, [rows, dim].
  std::shared_ptr<BlockStackHook> block_hook;
  std::shared_ptr<LinearHook> linear_hook;  // dit.h LinearHook, or null
  std::array<Buffer<float>, 2> stack_residual;
  std::array<size_t, 2> stack_residual_n{};  // floats held (0: none yet)
  // Self-attention key/value stores (set_kv_store): per CFG branch, per layer, [L, 2 * ldim] =
  // k | v post-RoPE, f32 (fp32 mode) or bf16; kv_store_tokens[b] = the L they were filled for
  // by a whole forward (0: not yet).
  bool kv_store_on = false;
  std::array<std::vector<Buffer<float>>, 2> kv_store32;
  std::array<std::vector<Buffer<BFloat16>>, 2> kv_store16;
  std::array<int64_t, 2> kv_store_tokens{};
  Buffer<BFloat16> act16, qkv16, hidden16;
  Buffer<BFloat16> linear_in16;  // only linear_f32_in converts into this one
  Buffer<float> pbsa_q32;        // PBSA: the chunk's q in rows of the cache's width
  Buffer<BFloat16> pbsa_q16;

  // `presliced`: `w` serves this rank's tensor-parallel slices already (ShardedBlocks).
  std::unique_ptr<DitBlockWeights> load_block(const WeightFn& w, int64_t index,
                                              bool presliced = false) const;
  size_t stem_bytes() const;  // the weights outside the blocks (embeddings, head)

  // The block as ops (dit_block.cpp): modulation vectors, then the three residual branches.
  void block_forward(int index, DitState& st);
  void self_attention(int index, const DitBlockWeights& w, DitState& st, const float* mod);
  void cross_attention(int index, const DitBlockWeights& w, DitState& st);
  void feed_forward(int index, const DitBlockWeights& w, DitState& st, const float* mod);
  // Self-attention on complete rows (one process, or a rank's heads after the Ulysses
  // exchange): the policy's plan or dense flash attention. q/k/v are the kernel's dtype;
  // q32/k32 (f32, same layout) feed the policy's estimators.
  template <typename T>
  void attention_core(int index, const DitState& st, const T* q, const T* k, const T* v,
                      const float* q32, const float* k32, const float* v32, int64_t stride,
                      int64_t tokens, int64_t heads, int64_t first_head, float* out,
                      int64_t out_stride);
  // Dense attention of this call's `rows` queries (qkv16 / qkv) over `keys` rows of k | v
  // ([keys, 2 * ldim]), into attn: the key/value store (token subsets) and the causal cache.
  template <typename T>
  void attend_to_kv_rows(const T* kv, int64_t rows, int64_t keys, int64_t heads, int64_t ldim);
  // Self-attention of a cached causal chunk (DitState::kv_cache), into attn.
  void causal_cached_attention(int index, DitState& st, int64_t heads, int64_t ldim);
  bool sequence_parallel() const;
  // Wan's q/k RMSNorm over all dim features of `rows` rows (row `stride`) of which this rank
  // holds its heads' columns (weight: their slice); under tp the statistics are all-reduced.
  void norm_heads(float* x, int64_t rows, int64_t stride, const std::vector<float>& weight);
  // Completes a row-split linear's output y [rows, out] under tp (sum, then bias); no-op at tp 1.
  void reduce_partial(const Linear& linear, float* y, int64_t rows);
  Buffer<float> tp_sums;  // norm_heads' per-row statistics
  // Runs `linear` on f32 rows `in` (converted to bf16 on the bf16 path) into `out`.
  void linear_f32_in(const PackedLinear& linear, const float* in, int64_t rows, float* out);
  // Block linear `site` of layer `layer` through the linear hook when one is set: true when the
  // hook wrote the output (y or y16), false when the caller runs the linear as usual.
  bool hooked_linear(const DitState& st, int layer, LinearSite site, const PackedLinear& linear,
                     const void* x, bool x_bf16, int64_t rows, float* y, BFloat16* y16 = nullptr);
};

}  // namespace vidax::wan
