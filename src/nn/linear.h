// A linear layer that knows how it is split across the ranks of a tensor-parallel group:
//   kReplicated  every rank holds the whole [N, K] weight;
//   kColumn      rank t holds output features [t*N/T, (t+1)*N/T) (and their bias): its output
//                is a column slice, no communication (q/k/v, FFN in);
//   kRow         rank t holds input features [t*K/T, (t+1)*K/T): its output is a partial sum
//                that an all-reduce completes (dist/tensor_parallel.h), bias added once after
//                it (o, FFN out).
// The split is a property of the layer, so model code calls forward() the same way whatever the
// mesh. With one tp rank every split holds the whole weight and the bias stays in the GEMM.
// Thread-safety: as PackedLinear (immutable after construction; forward is re-entrant).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/gemm.h"

namespace vidax {

enum class LinearSplit { kReplicated, kColumn, kRow };

// This process's place in a tensor-parallel group: rank `rank` of `size`.
struct TpShard {
  int rank = 0, size = 1;
};

class Linear : public PackedLinear {
 public:
  Linear() = default;
  Linear(PackedLinear packed, LinearSplit split) : PackedLinear(std::move(packed)), split_(split) {}
  LinearSplit split() const { return split_; }
  // kRow under tp > 1: the bias to add after the partial sums are reduced ([N]); else empty
  // (the bias, if any, is inside the GEMM).
  const std::vector<float>& bias_after_reduce() const { return bias_after_reduce_; }

  // Rank `shard.rank`'s part of the linear whose weight is the row-stack of `weights`
  // ([N_i, K] each, e.g. q | k | v fused) and whose bias is the stack of `biases` (same count,
  // or empty for none). A column split takes the rank's rows of every part (so a fused q|k|v
  // becomes this rank's q|k|v heads); a row split (one part) takes its columns. Only those
  // slices are read from the (mapped) source tensors. `name` labels errors: a split that does
  // not divide the sizes is an InputError.
  // With `fp8_scales` (one per part), `weights` are fp8 codes that stay fp8 in memory, or fp16
  // weights kept fp16 for f32 compute (PackedLinear::kept: part i's rows scaled by
  // fp8_scales[i]).
  // With `presliced`, `weights` and `biases` already are this rank's slices (as ShardedBlocks
  // keeps them): nothing is cut, but the split still decides where the bias goes.
  static Linear build(const std::string& name, const std::vector<Tensor>& weights,
                      const std::vector<Tensor>& biases, DType compute, GemmEpilogue epilogue,
                      LinearSplit split, TpShard shard, const std::vector<float>& fp8_scales = {},
                      bool presliced = false);

 private:
  LinearSplit split_ = LinearSplit::kReplicated;
  std::vector<float> bias_after_reduce_;
};

// Rank `shard.rank`'s slice [t*n/T, (t+1)*n/T) of a per-feature vector (a norm's weight) of n
// values; the whole vector with one rank. Empty stays empty.
std::vector<float> shard_vector(const std::vector<float>& v, TpShard shard);

}  // namespace vidax
