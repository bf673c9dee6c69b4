// SPADE-style adaptive 3D block-sparse attention: per head and call, (1) pick the 3D block shape
// whose blocks hold the most similar queries (mean pairwise cosine similarity inside a block,
// averaged over blocks), from spatial (1,4,16), (1,8,8), temporal (16,1,4), (8,1,8) and mixed
// (4,2,8), (2,4,8) candidates; (2) summarise each key block by its per-channel max and min and
// score every (query block, key block) pair by the largest q̄ . k any key in the block's box
// could reach (q̄ the query block's mean); (3) keep, per query-block row, the key blocks that
// carry top-p of the estimated attention (or the top-k), the p or k depending on the CFG branch
// and on early vs late steps; the sink block(s) and the diagonal block are always kept; the first
// layer(s) run dense. Heads that chose the same shape form one HeadGroup.
//
// One SpadePolicy serves one generation on one thread (it caches layouts per grid).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sparse/attention_policy.h"

namespace vidax::sparse {

struct SpadeOptions {
  double topp = 0.9;         // conditional branch, late steps
  double topp_uncond = -1;   // unconditional branch (< 0: same as topp)
  double topp_early = -1;    // the first `early` share of steps (< 0: same as the branch's p)
  double early = 0.0;        // share of steps that use topp_early
  int64_t topk = 0;          // > 0: keep this many key blocks per row instead of top-p
  int64_t topk_uncond = -1;  // unconditional branch (< 0: same as topk; 0: top-p there)
  int64_t topk_early = -1;   // the first `early` share of steps (< 0: the branch's k)
  int64_t dense_layers = 1;  // leading layers run dense
  int64_t sink = 1;          // leading key blocks every query block keeps
  int64_t shape_every = 1;   // choose shapes once per this many steps per (layer, branch)
  std::vector<BlockShape> shapes = default_shapes();

  static std::vector<BlockShape> default_shapes();
};
SpadeOptions parse_spade_options(std::string_view options);

// Mean over the layout's blocks (of at least two tokens) of the mean pairwise cosine similarity
// of head `head`'s queries inside the block; 0 when no block has two tokens.
double mean_block_query_similarity(const AttentionCall& call, int64_t head,
                                   const TokenLayout& layout);

// Estimated block attention of one head over `layout` ([q_blocks * k_blocks], rows sum to 1):
// score(qb, kb) = sum_c max(qmean_c * kmax_c, qmean_c * kmin_c) / sqrt(d), softmax over kb
// weighted by the key block's token count.
std::vector<double> spade_block_estimate(const AttentionCall& call, int64_t head,
                                         const TokenLayout& layout);

// Block summaries of one head for a fixed set of candidate shapes on one grid, computed the fast
// way the policy uses (equal to mean_block_query_similarity / spade_block_estimate on
// block3d_layout(grid, shape) up to f32 summation order): query_sums() walks the head's queries
// once in native order, a run of gcd(widths) tokens at a time, adding each run's sums to its
// block in every shape (all shapes' dimensions are multiples of the per-axis gcd, so a run never
// straddles a block); estimate() walks the keys once for one shape's per-channel max / min.
// Not thread-safe (one object per policy).
class SpadeSummaries {
 public:
  SpadeSummaries(const TokenGrid& grid, const std::vector<BlockShape>& shapes);
  // Sums of the head's queries per block of every shape; with `unit`, also of its unit-norm
  // queries (for similarity()). only_shape >= 0 (with unit false): that shape's sums only, the
  // only ones a following estimate() may then use.
  void query_sums(const AttentionCall& call, int64_t head, bool unit, int only_shape = -1);
  // Mean over blocks of >= 2 tokens of the mean pairwise cosine of the queries (last query_sums
  // with unit = true).
  double similarity(size_t shape) const;
  // spade_block_estimate of the head over `shape`'s blocks (last query_sums of this head).
  std::vector<double> estimate(const AttentionCall& call, int64_t head, size_t shape);
  // The policy's selection from the same estimate, row by row (no [nb, nb] estimate kept): per
  // query block of `shape`, the top-k key blocks (topk > 0; by score + ln(block size), the
  // estimate's order) or the shortest prefix of the descending estimate carrying p of the row,
  // plus the first `sink` blocks and the diagonal. keep = bit rows [nb][ceil(nb / 64)].
  void select(const AttentionCall& call, int64_t head, size_t shape, double p, int64_t topk,
              int64_t sink, std::vector<uint64_t>& keep);

 private:
  struct Geometry {
    int64_t nt = 0, nh = 0, nw = 0;
    std::vector<int64_t> sizes;  // tokens per block, raster order over the block grid
  };
  int64_t block_of(size_t shape, int64_t f, int64_t y, int64_t x) const;
  // x / shape.w for every column x of the grid (built on first use).
  const std::vector<int64_t>& column_blocks(size_t shape);
  // fn(block of `shape`, row of `head` in x of the run's first token, count) for every run of a
  // grid row that lies in one block (shape.w tokens, fewer at the right edge), in native order
  // (x is [tokens, stride] f32 or bf16 with the head at head * head_dim; head_dim is d_; the
  // run's rows are `stride` apart).
  template <class T, class Fn>
  void for_each_token_run(const T* x, int64_t stride, int64_t head, size_t shape, Fn&& fn);
  // score_ [nb, nb] = [q+ | q-] . [k_max | k_min]^T of `shape`'s blocks, unscaled.
  void block_scores(const AttentionCall& call, int64_t head, size_t shape);
  TokenGrid grid_;
  std::vector<BlockShape> shapes_;
  std::vector<Geometry> geo_;
  std::vector<int64_t> offset_;  // first block of each shape in the accumulators
  std::array<int64_t, 3> run_{1, 1, 1};
  int64_t d_ = 0;
  std::vector<float> unit_, raw_;                 // [blocks of all shapes, head_dim]
  std::vector<float> hi_, lo_, qs_, ks_, score_;  // block_scores() buffers, kept between calls
  std::vector<std::vector<int64_t>> columns_;     // column_blocks() per shape
};

class SpadePolicy final : public AttentionPolicy {
 public:
  explicit SpadePolicy(SpadeOptions options);
  std::string name() const override;
  AttentionPlan plan(const AttentionCall& call) override;

  // The p (top-p) used for this call's CFG branch and step.
  double topp_for(const AttentionCall& call) const;
  // The top-k budget of this call (0: top-p), by step and CFG branch like topp_for.
  int64_t topk_for(const AttentionCall& call) const;
  // Per head of the last sparse call: index into options().shapes and its similarity score.
  const std::vector<int>& last_shapes() const { return shape_of_; }
  const std::vector<std::vector<double>>& last_similarity() const { return similarity_; }
  // Whether the last sparse call chose shapes (false: it reused an earlier step's).
  bool last_reshaped() const { return reshaped_; }
  const SpadeOptions& options() const { return opt_; }
  const TokenLayout& layout_for(const TokenGrid& grid, size_t shape);
  // One SpadeSummaries per OpenMP thread for `grid` (plan() sums heads in parallel).
  std::vector<std::unique_ptr<SpadeSummaries>>& summaries_for(const TokenGrid& grid);

 private:
  SpadeOptions opt_;
  std::map<std::array<int64_t, 3>, std::vector<std::unique_ptr<TokenLayout>>> cache_;
  std::map<std::array<int64_t, 3>, std::vector<std::unique_ptr<SpadeSummaries>>> summaries_;
  struct Choice {
    int64_t step = 0;
    std::vector<int> shapes;
  };
  std::map<std::array<int64_t, 5>, Choice> choices_;  // (layer, branch, F, H, W)
  std::vector<int> shape_of_;
  bool reshaped_ = false;
  std::vector<std::vector<double>> similarity_;
};

}  // namespace vidax::sparse
