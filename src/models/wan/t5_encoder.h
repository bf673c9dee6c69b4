// The umT5 text encoder of Wan (`wan/modules/t5.py` T5Encoder, umt5-xxl layout) on the CPU with
// the reference semantics: per-block relative-position bias (bidirectional, 32 buckets), no
// 1/sqrt(d) attention scaling, padding keys excluded (the reference fills them with float32
// lowest), softmax in f32, T5 RMSNorm (eps 1e-6, no mean, no bias) before attention, FFN and at
// the end, gated-GELU(tanh) FFN, no biases.
//
// Precision: the residual stream, norms, attention and softmax are f32 in both modes; kBF16
// runs the projection GEMMs on bf16 inputs and weights (f32 accumulation), kFP32 in f32. The
// token embedding is kept as stored (F32/BF16/F16) for fp32 and as bf16 for bf16; only the rows
// of the prompt's tokens are ever converted.
//
// Thread-safety: forward()/encode() are not reentrant on one T5Encoder (scratch buffers are
// reused); the work inside is parallelised with OpenMP.
#pragma once

#include <memory>
#include <vector>

#include "core/exec_context.h"
#include "core/tensor.h"
#include "models/wan/dit.h"  // Precision, WeightFn, CaptureFn
#include "models/wan/t5_config.h"
#include "models/wan/tokenizer.h"

namespace vidax::wan {

class T5Encoder {
 public:
  // Under a mesh with tensor parallelism (ctx.mesh's tp > 1) this rank holds its tp shard of
  // every block (heads and FFN units, nn/linear.h); the ranks of that tp group must then call
  // forward()/encode() together with the same tokens, and each returns the whole output.
  T5Encoder(const T5Config& config, const WeightFn& weights, Precision precision,
            const ExecContext& ctx = {});
  ~T5Encoder();
  T5Encoder(T5Encoder&&) noexcept;
  T5Encoder& operator=(T5Encoder&&) noexcept;

  const T5Config& config() const;
  Precision precision() const;
  size_t held_weight_bytes() const;  // bytes held in packed/converted weights

  // ids, mask: [L] or [1, L], I64 (or I32); mask values 0/1 with at least one 1; ids in
  // [0, vocab). Returns [L, dim] F32, every row (padding rows included, as the reference).
  // capture receives "rel_buckets" [L, L] I64, "embed" [1, L, dim], per block i
  // "block<i>.pos_bias" [1, heads, L, L], "block<i>.attn_out", "block<i>.ffn_out",
  // "block<i>.out" [1, L, dim], and "out" [1, L, dim]. Throws InputError on bad input.
  Tensor forward(const Tensor& ids, const Tensor& mask, const CaptureFn& capture = nullptr);

  // A batch of prompts padded to one length, as T5EncoderModel runs them: ids, mask [B, L]
  // (B >= 1). Returns [B, L, dim]; row b equals forward(ids[b], mask[b]) (the encoder has no
  // cross-row operation). capture receives the names of forward() with the batch stacked on
  // dim 0 ([B, ...]; "rel_buckets" [L, L] once).
  Tensor forward_batch(const Tensor& ids, const Tensor& mask, const CaptureFn& capture = nullptr);

  // The pipeline's context: [count, dim] = forward(ids, mask)[:count], computed on the count
  // real tokens only (equal, since padding keys are masked and relative positions do not depend
  // on the padding).
  Tensor encode(const TokenizedText& text);
  // One context per prompt, each [count_b, dim], each computed on its own real tokens only.
  std::vector<Tensor> encode_batch(const std::vector<TokenizedText>& texts);

  // Bytes the weights take once loaded (packed matrices, embedding, tables) in `precision`.
  static int64_t weight_bytes(const T5Config& config, Precision precision);
  // Upper estimate of the scratch one forward over `tokens` tokens allocates.
  static int64_t activation_bytes(const T5Config& config, int64_t tokens);
  // 2 x multiply-adds of one forward over `tokens` tokens (for benchmarks).
  static double forward_flops(const T5Config& config, int64_t tokens);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vidax::wan
