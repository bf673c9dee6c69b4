// The block-sparse executor alone (kernels/cpu/block_sparse_attention.h) at Wan 1.3B head shapes
// on random bf16 q/k/v: 32,760 tokens, 2 heads (the per-head cost is what matters), ~13% of the
// key blocks per query-block row, every tile FULL. Args: block size (64: SPADE's 3D blocks, 128:
// Sparse VideoGen's / the window tiles) and mask kind (0: each row's blocks drawn at random over
// the whole sequence, as SPADE's top-k on random q/k; 1: a contiguous band around the diagonal,
// as a local window). Same number of active pairs in every case, so the times compare the cost
// per pair: key/value locality (band) against scattered blocks, 64 against 128 query rows per
// task. Block size 0 is the peer: the dense bf16 kernel (flash_attention) on the same inputs,
// so a run with --benchmark_enable_random_interleaving gives the speed-up over dense side by
// side (0.8 / density = 5.97 is issue 5's floor at this density).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "core/buffer.h"
#include "core/tensor.h"
#include "kernels/cpu/block_mask.h"
#include "kernels/cpu/block_sparse_attention.h"
#include "kernels/cpu/flash_attention.h"

namespace vidax {
namespace {

constexpr int64_t kTokens = 32760, kHeads = 2, kHd = 128;
constexpr double kDensity = 0.134;

void BM_BlockSparseExecutor(benchmark::State& state) {
  const int64_t block = state.range(0);
  const bool band = state.range(1) == 1;
  const size_t n = static_cast<size_t>(kTokens * kHeads * kHd);
  Buffer<BFloat16> q(n), k(n), v(n);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  for (auto* b : {&q, &k, &v})
    for (size_t i = 0; i < n; ++i) b->data()[i].bits = f32_to_bf16(nd(rng));
  std::vector<float> out(n);
  if (block == 0) {
    AttentionDims d{};
    d.q_len = d.kv_len = d.kv_valid = kTokens;
    d.heads = kHeads;
    d.head_dim = kHd;
    d.q_stride = d.k_stride = d.v_stride = d.out_stride = kHeads * kHd;
    d.scale = 1.0f / std::sqrt(static_cast<float>(kHd));
    for (auto _ : state) flash_attention(q.data(), k.data(), v.data(), out.data(), d);
    state.counters["density"] = 1;
    return;
  }
  const BlockPartition p = BlockPartition::uniform(kTokens, block);
  const int64_t nb = p.blocks(), per_row = std::llround(kDensity * static_cast<double>(nb));
  BlockMask mask(kHeads, nb, nb);
  std::vector<int64_t> all(static_cast<size_t>(nb));
  std::iota(all.begin(), all.end(), 0);
  for (int64_t h = 0; h < kHeads; ++h)
    for (int64_t qb = 0; qb < nb; ++qb) {
      if (band) {
        const int64_t first = std::clamp<int64_t>(qb - per_row / 2, 0, nb - per_row);
        for (int64_t kb = first; kb < first + per_row; ++kb) mask.set(h, qb, kb, TileClass::kFull);
      } else {
        std::shuffle(all.begin(), all.end(), rng);
        for (int64_t i = 0; i < per_row; ++i)
          mask.set(h, qb, all[static_cast<size_t>(i)], TileClass::kFull);
      }
    }
  mask.build_rows();
  const BlockSparseDims d{kHeads, kHd, 0, 1.0f / std::sqrt(static_cast<float>(kHd))};
  for (auto _ : state)
    block_sparse_attention(q.data(), k.data(), v.data(), out.data(), p, p, mask, {}, d);
  state.counters["density"] = mask.density(p, p);
}
BENCHMARK(BM_BlockSparseExecutor)
    ->Args({0, 0})
    ->Args({64, 0})
    ->Args({64, 1})
    ->Args({128, 0})
    ->Args({128, 1})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

}  // namespace
}  // namespace vidax
