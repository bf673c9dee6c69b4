// Public entry points of the block-sparse executor: argument checks and kernel choice. The
// kernels themselves are compiled per Highway target inside flash_attention.cpp
// (block_sparse_attention-inl.h).
#include "kernels/cpu/block_sparse_attention.h"

#include <cmath>

#include "core/error.h"
#include "core/thread_scratch.h"

namespace vidax {
namespace {

// The output's or the input's map (BlockSparseOutput / BlockSparseInput): rows a permutation of
// [0, tokens), heads in [0, map_heads), stride room for map_heads heads.
void check_row_map(const char* which, const int32_t* rows, const int64_t* heads, int64_t map_heads,
                   int64_t stride, int64_t tokens, const BlockSparseDims& d) {
  constexpr const char* kWhat = "block-sparse attention";
  const int64_t n = heads ? map_heads : d.heads;
  if (heads)
    for (int64_t h = 0; h < d.heads; ++h)
      if (heads[h] < 0 || heads[h] >= n)
        VIDAX_INTERNAL_ERROR(kWhat, ": ", which, " head ", heads[h], " outside [0, ", n, ")");
  if (stride != 0 && stride < n * d.head_dim)
    VIDAX_INTERNAL_ERROR(kWhat, ": ", which, " stride ", stride, " < ", n, " heads x ", d.head_dim);
  if (rows)
    for (int64_t i = 0; i < tokens; ++i)
      if (rows[i] < 0 || rows[i] >= tokens)
        VIDAX_INTERNAL_ERROR(kWhat, ": ", which, " row ", rows[i], " outside [0, ", tokens, ")");
}

void validate(const void* q, const void* k, const void* v, const float* out,
              const BlockPartition& qp, const BlockPartition& kp, const BlockMask& mask,
              const TilePredicate& predicate, const BlockSparseDims& d, const BlockSparseOutput& o,
              const BlockSparseInput& in) {
  constexpr const char* kWhat = "block-sparse attention";
  qp.validate("block-sparse attention: query blocks");
  kp.validate("block-sparse attention: key blocks");
  if (d.heads < 1 || d.head_dim < 1)
    VIDAX_INTERNAL_ERROR(kWhat, ": heads and head_dim must be >= 1, got ", d.heads, ", ",
                         d.head_dim);
  if (d.kv_valid < 0 || d.kv_valid > kp.tokens())
    VIDAX_INTERNAL_ERROR(kWhat, ": kv_valid must be in [0, ", kp.tokens(), "], got ", d.kv_valid);
  if (!std::isfinite(d.scale) || d.scale == 0.0f)
    VIDAX_INTERNAL_ERROR(kWhat, ": scale must be finite and non-zero, got ", d.scale);
  if (mask.heads() != d.heads || mask.q_blocks() != qp.blocks() || mask.k_blocks() != kp.blocks())
    VIDAX_INTERNAL_ERROR(kWhat, ": mask is ", mask.heads(), " heads x ", mask.q_blocks(), " x ",
                         mask.k_blocks(), " blocks, expected ", d.heads, " x ", qp.blocks(), " x ",
                         kp.blocks());
  if (!mask.rows_built()) VIDAX_INTERNAL_ERROR(kWhat, ": mask rows not built (call build_rows())");
  if (!q || !k || !v || !out) VIDAX_INTERNAL_ERROR(kWhat, ": null q, k, v or out pointer");
  check_row_map("output", o.rows, o.heads, o.dest_heads, o.stride, qp.tokens(), d);
  if (in.rows && qp.tokens() != kp.tokens())
    VIDAX_INTERNAL_ERROR(kWhat, ": input rows need query and key blocks over the same tokens, got ",
                         qp.tokens(), " and ", kp.tokens());
  check_row_map("input", in.rows, in.heads, in.src_heads, in.stride, qp.tokens(), d);
  if (!predicate) {
    for (int64_t h = 0; h < mask.heads(); ++h)
      for (int64_t qb = 0; qb < mask.q_blocks(); ++qb)
        for (const uint8_t b : mask.row(h, qb).boundary)
          if (b) VIDAX_INTERNAL_ERROR(kWhat, ": the mask has BOUNDARY tiles but no predicate");
  }
}

}  // namespace

void block_sparse_attention(const float* q, const float* k, const float* v, float* out,
                            const BlockPartition& q_blocks, const BlockPartition& k_blocks,
                            const BlockMask& mask, const TilePredicate& predicate,
                            const BlockSparseDims& d, const BlockSparseOutput& o,
                            const BlockSparseInput& in) {
  validate(q, k, v, out, q_blocks, k_blocks, mask, predicate, d, o, in);
  detail::block_sparse_dispatch(-1, q, k, v, out, q_blocks, k_blocks, mask, predicate, d, o, in);
}

void block_sparse_attention(const BFloat16* q, const BFloat16* k, const BFloat16* v, float* out,
                            const BlockPartition& q_blocks, const BlockPartition& k_blocks,
                            const BlockMask& mask, const TilePredicate& predicate,
                            const BlockSparseDims& d, const BlockSparseOutput& o,
                            const BlockSparseInput& in) {
  block_sparse_attention_bf16(AttentionBf16Kernel::kAuto, q, k, v, out, q_blocks, k_blocks, mask,
                              predicate, d, o, in);
}

void block_sparse_attention_bf16(AttentionBf16Kernel kernel, const BFloat16* q, const BFloat16* k,
                                 const BFloat16* v, float* out, const BlockPartition& q_blocks,
                                 const BlockPartition& k_blocks, const BlockMask& mask,
                                 const TilePredicate& predicate, const BlockSparseDims& d,
                                 const BlockSparseOutput& o, const BlockSparseInput& in) {
  validate(q, k, v, out, q_blocks, k_blocks, mask, predicate, d, o, in);
  if (!flash_attention_bf16_available(kernel))
    VIDAX_INTERNAL_ERROR("block-sparse attention: bf16 kernel #", static_cast<int>(kernel),
                         " is not available on this machine (", flash_attention_target(), ")");
  if (kernel == AttentionBf16Kernel::kAuto) kernel = auto_bf16_attention_kernel();
  detail::block_sparse_dispatch(static_cast<int>(kernel), q, k, v, out, q_blocks, k_blocks, mask,
                                predicate, d, o, in);
}

}  // namespace vidax
