#include "kernels/cpu/channel_reuse.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.h"

namespace vidax {
namespace {

constexpr int64_t kSumRows = 32;  // partial sums of x^2 per 32-row block: thread-count independent

#define VIDAX_REUSE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

inline float value(const BFloat16* p, int64_t i) { return bf16_to_f32(p[i].bits); }

// One row's groups: moved flags, ref update; adds x^2 into acc [k]. Returns still groups.
VIDAX_REUSE_CLONES int64_t row_bf16(const BFloat16* x, BFloat16* ref, int64_t k, const float* limit,
                                    uint8_t* changed, float* acc) {
  int64_t still = 0;
  for (int64_t c0 = 0, g = 0; c0 < k; c0 += kChannelGroup, ++g) {
    const int64_t c1 = std::min(k, c0 + kChannelGroup);
    float worst = -1.f;
#pragma omp simd reduction(max : worst)
    for (int64_t c = c0; c < c1; ++c) {
      const float now = value(x, c), was = value(ref, c);
      acc[c] += now * now;
      worst = std::max(worst, std::fabs(now - was) - limit[c]);
    }
    const bool moved = worst > 0.f;
    changed[g] = moved ? 1 : 0;
    still += moved ? 0 : 1;
    if (moved) std::memcpy(ref + c0, x + c0, sizeof(BFloat16) * static_cast<size_t>(c1 - c0));
  }
  return still;
}

VIDAX_REUSE_CLONES int64_t row_f32(const float* x, float* ref, int64_t k, const float* limit,
                                   uint8_t* changed, float* acc) {
  int64_t still = 0;
  for (int64_t c0 = 0, g = 0; c0 < k; c0 += kChannelGroup, ++g) {
    const int64_t c1 = std::min(k, c0 + kChannelGroup);
    float worst = -1.f;
#pragma omp simd reduction(max : worst)
    for (int64_t c = c0; c < c1; ++c) {
      acc[c] += x[c] * x[c];
      worst = std::max(worst, std::fabs(x[c] - ref[c]) - limit[c]);
    }
    const bool moved = worst > 0.f;
    changed[g] = moved ? 1 : 0;
    still += moved ? 0 : 1;
    if (moved) std::memcpy(ref + c0, x + c0, sizeof(float) * static_cast<size_t>(c1 - c0));
  }
  return still;
}

VIDAX_REUSE_CLONES void sumsq_row_bf16(const BFloat16* x, int64_t k, float* acc) {
  for (int64_t c = 0; c < k; ++c) {
    const float v = value(x, c);
    acc[c] += v * v;
  }
}

VIDAX_REUSE_CLONES void sumsq_row_f32(const float* x, int64_t k, float* acc) {
  for (int64_t c = 0; c < k; ++c) acc[c] += x[c] * x[c];
}

// Rows in blocks of kSumRows; `row(r, acc)` handles row r with its block's accumulator; the
// blocks' sums are added in order into sumsq (the order amx_gemm_bf16_reuse sums in). Returns
// the sum of row()'s.
template <typename RowFn>
int64_t over_chunks(int64_t rows, int64_t k, float* sumsq, RowFn row) {
  const int64_t blocks = std::max<int64_t>((rows + kSumRows - 1) / kSumRows, 1);
  std::vector<float> part(static_cast<size_t>(blocks * k), 0.f);
  int64_t total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total)
  for (int64_t b = 0; b < blocks; ++b) {
    float* acc = part.data() + b * k;
    for (int64_t r = b * kSumRows; r < std::min(rows, (b + 1) * kSumRows); ++r)
      total += row(r, acc);
  }
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < k; ++c) {
    float s = 0;
    for (int64_t b = 0; b < blocks; ++b) s += part[static_cast<size_t>(b * k + c)];
    sumsq[c] = s;
  }
  return total;
}

}  // namespace

int64_t channel_group_update(const BFloat16* x, BFloat16* ref, int64_t rows, int64_t k,
                             const float* limit, uint8_t* changed, float* sumsq) {
  const int64_t groups = (k + kChannelGroup - 1) / kChannelGroup;
  return over_chunks(rows, k, sumsq, [&](int64_t r, float* acc) {
    return row_bf16(x + r * k, ref + r * k, k, limit, changed + r * groups, acc);
  });
}

int64_t channel_group_update(const float* x, float* ref, int64_t rows, int64_t k,
                             const float* limit, uint8_t* changed, float* sumsq) {
  const int64_t groups = (k + kChannelGroup - 1) / kChannelGroup;
  return over_chunks(rows, k, sumsq, [&](int64_t r, float* acc) {
    return row_f32(x + r * k, ref + r * k, k, limit, changed + r * groups, acc);
  });
}

void channel_sumsq(const BFloat16* x, int64_t rows, int64_t k, float* sumsq) {
  over_chunks(rows, k, sumsq, [&](int64_t r, float* acc) {
    sumsq_row_bf16(x + r * k, k, acc);
    return int64_t{0};
  });
}

void channel_sumsq(const float* x, int64_t rows, int64_t k, float* sumsq) {
  over_chunks(rows, k, sumsq, [&](int64_t r, float* acc) {
    sumsq_row_f32(x + r * k, k, acc);
    return int64_t{0};
  });
}

}  // namespace vidax
