// Public entry points of the block-sparse executor: argument checks and kernel choice. The
// kernels themselves are compiled per Highway target inside flash_attention.cpp
// (block_sparse_attention-inl.h).
#include "kernels/cpu/block_sparse_attention.h"

#include <cmath>

#include "core/error.h"

namespace vidax {
namespace {

void validate(const void* q, const void* k, const void* v, const float* out,
              const BlockPartition& qp, const BlockPartition& kp, const BlockMask& mask,
              const TilePredicate& predicate, const BlockSparseDims& d, const BlockSparseOutput& o,
              const BlockSparseInput& in) {
  constexpr const char* kWhat = "block-sparse attention";
  qp.validate("block-sparse attention: query blocks");
  kp.validate("block-sparse attention: key blocks");
  if (d.heads < 1 || d.head_dim < 1)
    throw_input_error(kWhat, ": heads and head_dim must be >= 1, got ", d.heads, ", ", d.head_dim);
  if (d.kv_valid < 0 || d.kv_valid > kp.tokens())
    throw_input_error(kWhat, ": kv_valid must be in [0, ", kp.tokens(), "], got ", d.kv_valid);
  if (!std::isfinite(d.scale) || d.scale == 0.0f)
    throw_input_error(kWhat, ": scale must be finite and non-zero, got ", d.scale);
  if (mask.heads() != d.heads || mask.q_blocks() != qp.blocks() || mask.k_blocks() != kp.blocks())
    throw_input_error(kWhat, ": mask is ", mask.heads(), " heads x ", mask.q_blocks(), " x ",
                      mask.k_blocks(), " blocks, expected ", d.heads, " x ", qp.blocks(), " x ",
                      kp.blocks());
  if (!mask.rows_built()) throw_input_error(kWhat, ": mask rows not built (call build_rows())");
  if (!q || !k || !v || !out) throw_input_error(kWhat, ": null q, k, v or out pointer");
  const int64_t dest_heads = o.heads ? o.dest_heads : d.heads;
  if (o.heads)
    for (int64_t h = 0; h < d.heads; ++h)
      if (o.heads[h] < 0 || o.heads[h] >= dest_heads)
        throw_input_error(kWhat, ": output head ", o.heads[h], " outside [0, ", dest_heads, ")");
  if (o.stride != 0 && o.stride < dest_heads * d.head_dim)
    throw_input_error(kWhat, ": output stride ", o.stride, " < ", dest_heads, " heads x ",
                      d.head_dim);
  if (o.rows)
    for (int64_t i = 0; i < qp.tokens(); ++i)
      if (o.rows[i] < 0 || o.rows[i] >= qp.tokens())
        throw_input_error(kWhat, ": output row ", o.rows[i], " outside [0, ", qp.tokens(), ")");
  const int64_t src_heads = in.heads ? in.src_heads : d.heads;
  if (in.heads)
    for (int64_t h = 0; h < d.heads; ++h)
      if (in.heads[h] < 0 || in.heads[h] >= src_heads)
        throw_input_error(kWhat, ": input head ", in.heads[h], " outside [0, ", src_heads, ")");
  if (in.stride != 0 && in.stride < src_heads * d.head_dim)
    throw_input_error(kWhat, ": input stride ", in.stride, " < ", src_heads, " heads x ",
                      d.head_dim);
  if (in.rows) {
    if (qp.tokens() != kp.tokens())
      throw_input_error(kWhat, ": input rows need query and key blocks over the same tokens, got ",
                        qp.tokens(), " and ", kp.tokens());
    for (int64_t i = 0; i < qp.tokens(); ++i)
      if (in.rows[i] < 0 || in.rows[i] >= qp.tokens())
        throw_input_error(kWhat, ": input row ", in.rows[i], " outside [0, ", qp.tokens(), ")");
  }
  if (!predicate) {
    for (int64_t h = 0; h < mask.heads(); ++h)
      for (int64_t qb = 0; qb < mask.q_blocks(); ++qb)
        for (const uint8_t b : mask.row(h, qb).boundary)
          if (b) throw_input_error(kWhat, ": the mask has BOUNDARY tiles but no predicate");
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
    throw_input_error("block-sparse attention: bf16 kernel #", static_cast<int>(kernel),
                      " is not available on this machine (", flash_attention_target(), ")");
  if (kernel == AttentionBf16Kernel::kAuto)
    kernel = flash_attention_bf16_available(AttentionBf16Kernel::kAmx)
                 ? AttentionBf16Kernel::kAmx
                 : AttentionBf16Kernel::kWidened;
  detail::block_sparse_dispatch(static_cast<int>(kernel), q, k, v, out, q_blocks, k_blocks, mask,
                                predicate, d, o, in);
}

}  // namespace vidax
