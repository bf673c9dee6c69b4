#include "kernels/cpu/token_permute.h"

#include <cstring>
#include <string>
#include <type_traits>

#include "core/error.h"

namespace vidax {
namespace {

void check_common(int64_t tokens, int64_t total_heads, int64_t head_dim, int64_t stride,
                  std::span<const int32_t> perm, std::span<const int64_t> heads, const char* what) {
  if (tokens < 0 || total_heads < 1 || head_dim < 1)
    throw_input_error(what, ": expected tokens >= 0, heads >= 1 and head_dim >= 1, got ", tokens,
                      ", ", total_heads, ", ", head_dim);
  if (stride < total_heads * head_dim)
    throw_input_error(what, ": row stride ", stride,
                      " is shorter than heads*head_dim = ", total_heads * head_dim);
  if (!perm.empty() && static_cast<int64_t>(perm.size()) != tokens)
    throw_input_error(what, ": permutation has ", perm.size(), " entries for ", tokens, " tokens");
  for (const int32_t p : perm)
    if (p < 0 || p >= tokens)
      throw_input_error(what, ": permutation entry ", p, " outside [0, ", tokens, ")");
  if (heads.empty()) throw_input_error(what, ": empty head list");
  for (const int64_t h : heads)
    if (h < 0 || h >= total_heads)
      throw_input_error(what, ": head ", h, " outside [0, ", total_heads, ")");
}

// f32_to_bf16 (round to nearest even, NaN kept quiet) written without a branch so that the
// compiler vectorizes the row loop. convert_floats would give the same bits, but it opens an
// OpenMP region per call, which costs more than converting one 128-element row.
inline void rows_to_bf16(const float* src, BFloat16* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, src + i, 4);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (u >> 16) | 0x40u;
    dst[i].bits = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
}

template <class T>
void gather(const StridedRows& src, std::span<const int32_t> perm, std::span<const int64_t> heads,
            T* dst) {
  check_common(src.tokens, src.heads, src.head_dim, src.stride, perm, heads, "gather_token_heads");
  if (src.tokens > 0 && (src.data == nullptr || dst == nullptr))
    throw_input_error("gather_token_heads: null source or destination");
  const int64_t gh = static_cast<int64_t>(heads.size()), hd = src.head_dim;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < src.tokens; ++i) {
    const int64_t t = perm.empty() ? i : perm[static_cast<size_t>(i)];
    const float* row = src.data + t * src.stride;
    T* out = dst + i * gh * hd;
    for (int64_t g = 0; g < gh; ++g) {
      const float* from = row + heads[static_cast<size_t>(g)] * hd;
      if constexpr (std::is_same_v<T, float>) {
        std::memcpy(out + g * hd, from, static_cast<size_t>(hd) * sizeof(float));
      } else {
        // The same rounding as the dense path's qkv conversion, so both see identical inputs.
        rows_to_bf16(from, out + g * hd, hd);
      }
    }
  }
}

}  // namespace

void gather_token_heads(const StridedRows& src, std::span<const int32_t> perm,
                        std::span<const int64_t> heads, float* dst) {
  gather(src, perm, heads, dst);
}

void gather_token_heads(const StridedRows& src, std::span<const int32_t> perm,
                        std::span<const int64_t> heads, BFloat16* dst) {
  gather(src, perm, heads, dst);
}

void scatter_token_heads(const float* src, int64_t tokens, int64_t head_dim,
                         std::span<const int32_t> perm, std::span<const int64_t> heads, float* dst,
                         int64_t dst_stride, int64_t dst_heads) {
  check_common(tokens, dst_heads, head_dim, dst_stride, perm, heads, "scatter_token_heads");
  if (tokens > 0 && (src == nullptr || dst == nullptr))
    throw_input_error("scatter_token_heads: null source or destination");
  const int64_t gh = static_cast<int64_t>(heads.size());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < tokens; ++i) {
    const int64_t t = perm.empty() ? i : perm[static_cast<size_t>(i)];
    const float* in = src + i * gh * head_dim;
    float* row = dst + t * dst_stride;
    for (int64_t g = 0; g < gh; ++g)
      std::memcpy(row + heads[static_cast<size_t>(g)] * head_dim, in + g * head_dim,
                  static_cast<size_t>(head_dim) * sizeof(float));
  }
}

}  // namespace vidax
