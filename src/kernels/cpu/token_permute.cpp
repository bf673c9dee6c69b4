#include "kernels/cpu/token_permute.h"

#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/convert.h"
#include "core/error.h"

namespace vidax {
namespace {

void check_common(int64_t tokens, int64_t total_heads, int64_t head_dim, int64_t stride,
                  std::span<const int32_t> perm, std::span<const int64_t> heads, const char* what) {
  if (tokens < 0 || total_heads < 1 || head_dim < 1)
    VIDAX_INTERNAL_ERROR(what, ": expected tokens >= 0, heads >= 1 and head_dim >= 1, got ", tokens,
                         ", ", total_heads, ", ", head_dim);
  if (stride < total_heads * head_dim)
    VIDAX_INTERNAL_ERROR(what, ": row stride ", stride,
                         " is shorter than heads*head_dim = ", total_heads * head_dim);
  if (!perm.empty() && static_cast<int64_t>(perm.size()) != tokens)
    VIDAX_INTERNAL_ERROR(what, ": permutation has ", perm.size(), " entries for ", tokens,
                         " tokens");
  for (const int32_t p : perm)
    if (p < 0 || p >= tokens)
      VIDAX_INTERNAL_ERROR(what, ": permutation entry ", p, " outside [0, ", tokens, ")");
  if (heads.empty()) VIDAX_INTERNAL_ERROR(what, ": empty head list");
  for (const int64_t h : heads)
    if (h < 0 || h >= total_heads)
      VIDAX_INTERNAL_ERROR(what, ": head ", h, " outside [0, ", total_heads, ")");
}

// (first group head, count) of each run of consecutive model heads: rows are copied a run at a
// time (a group of all heads is one copy per token).
std::vector<std::pair<int64_t, int64_t>> head_runs(std::span<const int64_t> heads) {
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (size_t g = 0; g < heads.size(); ++g) {
    if (g > 0 && heads[g] == heads[g - 1] + 1)
      ++runs.back().second;
    else
      runs.emplace_back(static_cast<int64_t>(g), 1);
  }
  return runs;
}

template <class Rows, class T>
void gather(const Rows& src, std::span<const int32_t> perm, std::span<const int64_t> heads,
            T* dst) {
  using S = std::remove_cv_t<std::remove_pointer_t<decltype(src.data)>>;
  check_common(src.tokens, src.heads, src.head_dim, src.stride, perm, heads, "gather_token_heads");
  if (src.tokens > 0 && (src.data == nullptr || dst == nullptr))
    VIDAX_INTERNAL_ERROR("gather_token_heads: null source or destination");
  const int64_t gh = static_cast<int64_t>(heads.size()), hd = src.head_dim;
  const auto runs = head_runs(heads);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < src.tokens; ++i) {
    const int64_t t = perm.empty() ? i : perm[static_cast<size_t>(i)];
    const S* row = src.data + t * src.stride;
    T* out = dst + i * gh * hd;
    // One copy / conversion per run of consecutive heads (all heads: one per token). The
    // bf16 rounding is convert_floats', so sparse and dense groups see identical inputs.
    for (const auto& [g0, n] : runs)
      convert_floats_serial(row + heads[static_cast<size_t>(g0)] * hd, dtype_of<S>(), out + g0 * hd,
                            dtype_of<T>(), static_cast<size_t>(n * hd));
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

void gather_token_heads(const StridedRowsBf16& src, std::span<const int32_t> perm,
                        std::span<const int64_t> heads, BFloat16* dst) {
  gather(src, perm, heads, dst);
}

void scatter_token_heads(const float* src, int64_t tokens, int64_t head_dim,
                         std::span<const int32_t> perm, std::span<const int64_t> heads, float* dst,
                         int64_t dst_stride, int64_t dst_heads) {
  check_common(tokens, dst_heads, head_dim, dst_stride, perm, heads, "scatter_token_heads");
  if (tokens > 0 && (src == nullptr || dst == nullptr))
    VIDAX_INTERNAL_ERROR("scatter_token_heads: null source or destination");
  const int64_t gh = static_cast<int64_t>(heads.size());
  const auto runs = head_runs(heads);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < tokens; ++i) {
    const int64_t t = perm.empty() ? i : perm[static_cast<size_t>(i)];
    const float* in = src + i * gh * head_dim;
    float* row = dst + t * dst_stride;
    for (const auto& [g0, n] : runs)
      std::memcpy(row + heads[static_cast<size_t>(g0)] * head_dim, in + g0 * head_dim,
                  static_cast<size_t>(n * head_dim) * sizeof(float));
  }
}

}  // namespace vidax
