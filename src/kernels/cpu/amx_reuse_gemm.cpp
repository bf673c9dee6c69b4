#include "kernels/cpu/amx_reuse_gemm.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/convert.h"
#include "core/error.h"
#include "core/thread_scratch.h"
#include "kernels/cpu/amx_tiles-inl.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/elementwise.h"

namespace vidax {
namespace {

using namespace amx_detail;  // NOLINT(google-build-using-namespace): this file is the kernel

constexpr int64_t kMaxChunkSteps = 64;  // K steps per chunk, as amx_gemm_bf16 (kMaxChunkBytes)
static_assert(kMaxChunkSteps == kMaxChunkBytes / (kMaxBlockSubs * 32 * 64));

VIDAX_AMX inline __mmask32 lanes32(int64_t valid) {
  return valid >= 32 ? 0xffffffffu : static_cast<__mmask32>((1u << valid) - 1);
}
// The low and high 16 bf16 values of a 32-value vector, as f32 (exact).
VIDAX_AMX inline __m512 low_f32(__m512i v) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(v)), 16));
}
VIDAX_AMX inline __m512 high_f32(__m512i v) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(v, 1)), 16));
}

// One 32-row block's share of a K chunk [s0, s0 + steps): the moved flags of its `rows` rows, the
// per-channel sums of x^2 (part, indexed by channel, zeroed here first), the K steps it computes
// (step_of: chunk-relative, ascending; returned count) and their A tiles in `a` (delta, or x
// when first; zero rows where the row did not move), ref brought up to date. Counts are added.
template <typename X>
VIDAX_AMX int64_t decide_and_pack(const X* x, int64_t x_stride, int64_t k, int64_t n,
                                  const AmxReuseState& s, int64_t r0, int64_t rows, int64_t s0,
                                  int64_t steps, uint16_t* a, int32_t* step_of, float* part,
                                  AmxReuseCounts& cnt) {
  uint8_t moved[32][kMaxChunkSteps];
  const __m512 zero_ps = _mm512_setzero_ps();
  std::memset(part + s0 * 32, 0, sizeof(float) * static_cast<size_t>(steps * 32));
  for (int64_t rr = 0; rr < rows; ++rr) {
    const X* src = x + (r0 + rr) * x_stride;
    const auto* ref = reinterpret_cast<const uint16_t*>(s.ref + (r0 + rr) * k);
    for (int64_t st = 0; st < steps; ++st) {
      const int64_t c = (s0 + st) * 32, valid = std::min<int64_t>(32, k - c);
      const __m512i xv = load_k_step(src + c, valid);
      const __m512 xl = low_f32(xv), xh = high_f32(xv);
      // part += x^2 (a multiply, then an add: the reference's order and rounding)
      _mm512_storeu_ps(part + c, _mm512_add_ps(_mm512_loadu_ps(part + c), _mm512_mul_ps(xl, xl)));
      _mm512_storeu_ps(part + c + 16,
                       _mm512_add_ps(_mm512_loadu_ps(part + c + 16), _mm512_mul_ps(xh, xh)));
      if (s.first) {
        moved[rr][st] = 1;
        continue;
      }
      const __m512i rv = _mm512_maskz_loadu_epi16(lanes32(valid), ref + c);
      const auto m_lo = static_cast<__mmask16>(valid >= 16 ? 0xffff : (1u << valid) - 1);
      const auto m_hi = static_cast<__mmask16>(valid >= 32   ? 0xffff
                                               : valid <= 16 ? 0
                                                             : (1u << (valid - 16)) - 1);
      const __m512 ll = _mm512_maskz_loadu_ps(m_lo, s.limit + c);
      const __m512 lh = _mm512_maskz_loadu_ps(m_hi, s.limit + c + 16);
      const __m512 dl = _mm512_sub_ps(_mm512_abs_ps(_mm512_sub_ps(xl, low_f32(rv))), ll);
      const __m512 dh = _mm512_sub_ps(_mm512_abs_ps(_mm512_sub_ps(xh, high_f32(rv))), lh);
      moved[rr][st] = (_mm512_cmp_ps_mask(dl, zero_ps, _CMP_GT_OQ) |
                       _mm512_cmp_ps_mask(dh, zero_ps, _CMP_GT_OQ)) != 0
                          ? 1
                          : 0;
    }
  }
  // The steps the block computes: those any of its rows moved in.
  int64_t count = 0;
  int32_t slot[kMaxChunkSteps];
  for (int64_t st = 0; st < steps; ++st) {
    int64_t still = 0;
    for (int64_t rr = 0; rr < rows; ++rr) still += moved[rr][st] == 0 ? 1 : 0;
    cnt.groups_reused += still;
    if (still < rows) {
      slot[st] = static_cast<int32_t>(count);
      step_of[count++] = static_cast<int32_t>(st);
    } else {
      slot[st] = -1;
      const int64_t valid = std::min<int64_t>(32, k - (s0 + st) * 32);
      ++cnt.steps_skipped;
      cnt.flops_skipped += 2.0 * static_cast<double>(rows * valid * n);
    }
  }
  if (count == 0) return 0;
  // Their A tiles, row by row (the delta of a moved group, zero elsewhere); ref follows x.
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t rr = 0; rr < 32; ++rr) {
    uint16_t* d = a + (rr / 16) * kTileElems + (rr % 16) * 32;
    if (rr >= rows) {
      for (int64_t i = 0; i < count; ++i) _mm512_store_si512(d + i * kStepElems, zero);
      continue;
    }
    const X* src = x + (r0 + rr) * x_stride;
    auto* ref = reinterpret_cast<uint16_t*>(s.ref + (r0 + rr) * k);
    for (int64_t st = 0; st < steps; ++st) {
      if (slot[st] < 0) continue;
      uint16_t* dst = d + slot[st] * kStepElems;
      if (moved[rr][st] == 0) {
        _mm512_store_si512(dst, zero);
        continue;
      }
      const int64_t c = (s0 + st) * 32, valid = std::min<int64_t>(32, k - c);
      const __m512i xv = load_k_step(src + c, valid);
      if (s.first) {
        _mm512_store_si512(dst, xv);
      } else {
        const __m512i rv = _mm512_maskz_loadu_epi16(lanes32(valid), ref + c);
        const __m256i lo = to_bf16(_mm512_sub_ps(low_f32(xv), low_f32(rv)));
        const __m256i hi = to_bf16(_mm512_sub_ps(high_f32(xv), high_f32(rv)));
        _mm512_store_si512(dst, _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
      }
      _mm512_mask_storeu_epi16(ref + c, lanes32(valid), xv);
    }
  }
  return count;
}

struct ReusePlan {
  int64_t m = 0, chunk_steps = 0, chunks = 0, part_stride = 0, row_blocks = 0;
};

// Row blocks [sub_begin, sub_end) of 32 rows, up to kMaxBlockSubs at a time: per K chunk the
// blocks' decisions and A tiles, then every weight panel against them while it is in L2.
template <typename X>
VIDAX_AMX void reuse_rows(const X* x, int64_t x_stride, const AmxPackedWeight& w,
                          const AmxReuseState& s, const EpilogueArgs& ea, const ReusePlan& plan,
                          int64_t sub_begin, int64_t sub_end, float* part, AmxReuseCounts& cnt) {
  if (sub_begin >= sub_end) return;
  static thread_local ThreadScratch<ThreadBuffer> a_scratch, c_scratch;
  ThreadBuffer& a_buf = a_scratch.value;
  ThreadBuffer& c_buf = c_scratch.value;
  const int64_t n = w.n(), k = w.k();
  alignas(64) float scratch[32 * 32];
  int32_t step_of[kMaxBlockSubs][kMaxChunkSteps];
  int64_t count[kMaxBlockSubs];
  bool changed[kMaxBlockSubs];  // the block computed a K step in some chunk: its kept product moves
  const TileConfig config;
  PendingBlock pending;
  VIDAX_AMX_BARRIER();
  _tile_loadconfig(&config);
  for (int64_t sub0 = sub_begin; sub0 < sub_end; sub0 += kMaxBlockSubs) {
    const int64_t sub1 = std::min(sub_end, sub0 + kMaxBlockSubs), subs = sub1 - sub0;
    const int64_t r0 = sub0 * 32, rows = std::min(plan.m, sub1 * 32) - r0;
    // The pending block may live in c_buf, which get() below may reallocate.
    if (pending.c != nullptr && plan.chunks > 1) {
      epilogue_rows(pending, pending.rows, ea);
      pending.c = nullptr;
    }
    auto* a = static_cast<uint16_t*>(a_buf.get(subs * plan.chunk_steps * kStepElems * 2));
    float* c_all = plan.chunks > 1
                       ? static_cast<float*>(c_buf.get(w.panels() * subs * 1024 * sizeof(float)))
                       : nullptr;
    std::fill(changed, changed + kMaxBlockSubs, false);
    for (int64_t ch = 0; ch < plan.chunks; ++ch) {
      const int64_t s0 = ch * plan.chunk_steps;
      const int64_t steps = std::min(plan.chunk_steps, w.k_steps() - s0);
      for (int64_t sub = 0; sub < subs; ++sub) {
        count[sub] = decide_and_pack(x, x_stride, k, n, s, r0 + sub * 32,
                                     std::min<int64_t>(32, rows - sub * 32), s0, steps,
                                     a + sub * plan.chunk_steps * kStepElems, step_of[sub],
                                     part + (sub0 + sub) * plan.part_stride, cnt);
        changed[sub] = changed[sub] || count[sub] > 0 || s.first;
      }
      const bool last = ch + 1 == plan.chunks;
      for (int64_t p = 0; p < w.panels(); ++p) {
        const uint16_t* b = w.panel(p) + s0 * kStepElems;
        const int64_t n0 = p * 32, cols = std::min<int64_t>(32, n - n0);
        for (int64_t sub = 0; sub < subs; ++sub) {
          const int64_t rs = r0 + sub * 32, rows_sub = std::min<int64_t>(32, rows - sub * 32);
          float* c = c_all != nullptr ? c_all + (p * subs + sub) * 1024 : scratch;
          float* kept = s.kept + (p * plan.row_blocks + sub0 + sub) * 1024;
          if (ch == 0 && !s.first && (sub + 1 < subs || p + 1 < w.panels())) {
            // the next block's kept product, into L2
            const char* next = reinterpret_cast<const char*>(
                sub + 1 < subs ? kept + 1024 : s.kept + ((p + 1) * plan.row_blocks + sub0) * 1024);
            for (int64_t line = 0; line < 4096; line += 64) _mm_prefetch(next + line, _MM_HINT_T1);
          }
          if (plan.chunks == 1 && !s.first && count[sub] == 0) {
            // Nothing to add: the epilogue reads the kept block itself (no tile traffic), while
            // the next computed block's tiles run.
            if (pending.c != nullptr) epilogue_rows(pending, pending.rows, ea);
            pending = PendingBlock{kept, 0, rows_sub, cols, rs, n0, nullptr};
            continue;
          }
          const float* c_in = ch > 0 ? c : s.first ? nullptr : kept;
          tile_block(a + sub * plan.chunk_steps * kStepElems, b, step_of[sub], count[sub], c_in, c,
                     pending, ea);
          if (last)
            pending = PendingBlock{c, 0, rows_sub, cols, rs, n0, changed[sub] ? kept : nullptr};
        }
      }
    }
  }
  if (pending.c != nullptr) epilogue_rows(pending, pending.rows, ea);
  _tile_release();
  VIDAX_AMX_BARRIER();
}

template <typename X>
AmxReuseCounts run_reuse(const X* x, int64_t m, int64_t x_stride, const AmxPackedWeight& w,
                         GemmEpilogue epilogue, const AmxReuseState& s, const AmxReuseOutput& y) {
  VIDAX_CHECK(amx_bf16_usable(), "amx_gemm_bf16_reuse on a machine without usable AMX-BF16");
  VIDAX_CHECK(w.defined() && !w.is_fp8(), "amx_gemm_bf16_reuse takes a bf16 weight");
  VIDAX_CHECK(x_stride >= w.k(), "amx_gemm_bf16_reuse: row stride ", x_stride, " < K ", w.k());
  VIDAX_CHECK((y.f32 == nullptr) != (y.bf16 == nullptr), "amx_gemm_bf16_reuse: one output");
  VIDAX_CHECK(s.ref != nullptr && s.kept != nullptr && s.sumsq != nullptr &&
                  (s.first || s.limit != nullptr),
              "amx_gemm_bf16_reuse: missing state");
  AmxReuseCounts total;
  const int64_t k = w.k();
  if (m <= 0) {
    std::fill(s.sumsq, s.sumsq + k, 0.f);
    return total;
  }
  ReusePlan plan;
  plan.m = m;
  plan.chunks = ceil_div(w.k_steps(), kMaxChunkSteps);
  plan.chunk_steps = ceil_div(w.k_steps(), plan.chunks);
  plan.part_stride = w.k_steps() * 32;
  plan.row_blocks = ceil_div(m, 32);
  const int64_t subs = ceil_div(m, 32);
  static thread_local ThreadScratch<ThreadBuffer> part_scratch;
  auto* part = static_cast<float*>(
      part_scratch.value.get(static_cast<size_t>(subs * plan.part_stride) * sizeof(float)));
  EpilogueArgs ea;
  ea.bias = s.first ? w.bias() : nullptr;
  ea.epilogue = epilogue;
  ea.out = Output{y.f32, y.bf16, w.n()};
  ea.fast_gelu = !s.first;  // the first call equals amx_gemm_bf16 bit for bit
  const int threads =
      static_cast<int>(std::min<int64_t>(omp_in_parallel() ? 1 : omp_get_max_threads(), subs));
  std::vector<AmxReuseCounts> per(static_cast<size_t>(threads));
  if (threads == 1) {
    reuse_rows(x, x_stride, w, s, ea, plan, 0, subs, part, per[0]);
  } else {
#pragma omp parallel num_threads(threads)
    {
      const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      reuse_rows(x, x_stride, w, s, ea, plan, subs * t / nt, subs * (t + 1) / nt, part,
                 per[static_cast<size_t>(t)]);
    }
  }
  for (const AmxReuseCounts& c : per) {
    total.groups_reused += c.groups_reused;
    total.steps_skipped += c.steps_skipped;
    total.flops_skipped += c.flops_skipped;
  }
  // The blocks' sums of x^2, in block order.
#pragma omp parallel for schedule(static) if (threads > 1 && k >= 1024)
  for (int64_t c = 0; c < k; ++c) {
    float sum = 0;
    for (int64_t b = 0; b < subs; ++b) sum += part[b * plan.part_stride + c];
    s.sumsq[c] = sum;
  }
  return total;
}

}  // namespace

int64_t amx_reuse_kept_elements(int64_t m, const AmxPackedWeight& w) {
  return ceil_div(m, 32) * w.panels() * 1024;
}

int64_t amx_reuse_kept_index(int64_t m, int64_t r, int64_t c) {
  return ((c / 32) * ceil_div(m, 32) + r / 32) * 1024 + (r % 32) * 32 + c % 32;
}

AmxReuseCounts amx_gemm_bf16_reuse(const BFloat16* x, int64_t m, int64_t x_stride,
                                   const AmxPackedWeight& w, GemmEpilogue epilogue,
                                   const AmxReuseState& state, const AmxReuseOutput& y) {
  return run_reuse(x, m, x_stride, w, epilogue, state, y);
}

AmxReuseCounts amx_gemm_bf16_reuse(const float* x, int64_t m, int64_t x_stride,
                                   const AmxPackedWeight& w, GemmEpilogue epilogue,
                                   const AmxReuseState& state, const AmxReuseOutput& y) {
  return run_reuse(x, m, x_stride, w, epilogue, state, y);
}

AmxReuseCounts gemm_reuse_reference(const BFloat16* x, int64_t m, int64_t x_stride,
                                    const AmxPackedWeight& w, GemmEpilogue epilogue,
                                    const AmxReuseState& s, float* y) {
  VIDAX_CHECK(w.defined() && !w.is_fp8(), "gemm_reuse_reference takes a bf16 weight");
  const int64_t n = w.n(), k = w.k(), steps = w.k_steps(), blocks = (m + 31) / 32;
  auto xv = [&](int64_t r, int64_t c) { return bf16_to_f32(x[r * x_stride + c].bits); };
  auto rv = [&](int64_t r, int64_t c) { return bf16_to_f32(s.ref[r * k + c].bits); };
  AmxReuseCounts cnt;
  // Sums of x^2: per 32-row block in row order, then the blocks in order.
  std::vector<float> part(static_cast<size_t>(k), 0.f);
  for (int64_t c = 0; c < k; ++c) s.sumsq[c] = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    std::fill(part.begin(), part.end(), 0.f);
    for (int64_t r = b * 32; r < std::min(m, b * 32 + 32); ++r)
      for (int64_t c = 0; c < k; ++c) part[static_cast<size_t>(c)] += xv(r, c) * xv(r, c);
    for (int64_t c = 0; c < k; ++c) s.sumsq[c] += part[static_cast<size_t>(c)];
  }
  std::vector<uint8_t> moved(static_cast<size_t>(m * steps), 0);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t g = 0; g < steps; ++g) {
      bool any = s.first;
      for (int64_t c = g * 32; c < std::min(k, g * 32 + 32) && !any; ++c)
        any = std::fabs(xv(r, c) - rv(r, c)) - s.limit[c] > 0.f;
      moved[static_cast<size_t>(r * steps + g)] = any ? 1 : 0;
      cnt.groups_reused += any ? 0 : 1;
    }
  std::vector<uint8_t> computed(static_cast<size_t>(blocks * steps), 0);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t g = 0; g < steps; ++g) {
      const int64_t rows = std::min<int64_t>(32, m - b * 32);
      for (int64_t r = b * 32; r < b * 32 + rows; ++r)
        computed[static_cast<size_t>(b * steps + g)] |= moved[static_cast<size_t>(r * steps + g)];
      if (computed[static_cast<size_t>(b * steps + g)] == 0) {
        ++cnt.steps_skipped;
        cnt.flops_skipped +=
            2.0 * static_cast<double>(rows * std::min<int64_t>(32, k - g * 32) * n);
      }
    }
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t col = 0; col < n; ++col) {
      const int64_t p = col / 32, j = (col % 32) / 16, cc = col % 16;
      double sum = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        const int64_t g = kk / 32, q = (kk % 32) / 2, e = kk % 2;
        if (moved[static_cast<size_t>(r * steps + g)] == 0) continue;
        const float d = s.first ? xv(r, kk) : bf16_to_f32(f32_to_bf16(xv(r, kk) - rv(r, kk)));
        const uint16_t wv = w.panel(p)[(g * 2 + j) * kTileElems + q * 32 + cc * 2 + e];
        sum += static_cast<double>(bf16_to_f32(wv)) * static_cast<double>(d);
      }
      float& kept = s.kept[amx_reuse_kept_index(m, r, col)];
      const float base = s.first ? (w.bias() != nullptr ? w.bias()[col] : 0.f) : kept;
      kept = static_cast<float>(static_cast<double>(base) + sum);
    }
    for (int64_t g = 0; g < steps; ++g)
      if (moved[static_cast<size_t>(r * steps + g)] != 0)
        for (int64_t c = g * 32; c < std::min(k, g * 32 + 32); ++c)
          s.ref[r * k + c] = x[r * x_stride + c];
  }
  for (int64_t r = 0; r < m; ++r)
    for (int64_t col = 0; col < n; ++col) y[r * n + col] = s.kept[amx_reuse_kept_index(m, r, col)];
  if (epilogue == GemmEpilogue::kGeluTanh)
    gelu_tanh(y, y, m * n);
  else if (epilogue == GemmEpilogue::kGeluErf)
    gelu_erf(y, y, m * n);
  return cnt;
}

}  // namespace vidax
