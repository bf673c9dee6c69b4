// Flash attention kernels (contract in flash_attention.h; algorithm notes in docs/kernels.md).
//
// foreach_target.h compiles this file once per Highway target. One call runs, per group of heads
// (the group is sized so that its packed K/V stay within a bounded scratch buffer):
//   omp parallel {
//     omp for:          pack the group's key/value blocks into contiguous, padded layouts
//     omp for dynamic:  one task per (head, query block)
//   }
// A task keeps, for each of its query rows, the running maximum m (log2 domain), the running
// sum l and the unnormalised output O, and walks the key blocks:
//   S = Q K^T               register-tiled (kR rows x kC vectors of keys), f32 accumulation
//   m' = max(m, rowmax S c) with c = scale * log2(e), so that the exponentials are powers of 2
//   alpha = 2^(m - m'), P = 2^(S c - m'), l = alpha l + rowsum P
//   O = alpha O + P V       register-tiled (kR rows x kC vectors of channels)
// and finally writes O / l. Only a [block_q, kBlockK] tile of scores ever exists.
// The AVX-512-only kernels (vdpbf16ps, AMX) live in flash_attention_x86-inl.h.

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_scratch.h"
#include "kernels/cpu/block_sparse_attention.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/flash_attention.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/flash_attention.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/aligned_allocator.h"
#include "hwy/highway.h"

// Target-independent helpers, compiled once.
#ifndef VIDAX_KERNELS_CPU_FLASH_ATTENTION_SHARED_
#define VIDAX_KERNELS_CPU_FLASH_ATTENTION_SHARED_
namespace vidax::fa {

constexpr int64_t kBlockK = 64;  // keys per block: 4 AVX-512 vectors of f32 scores
constexpr double kLog2e = 1.4426950408889634;
// Upper bound on the packed K/V scratch of one head group; one head is always allowed.
constexpr int64_t kPackBudgetBytes = int64_t{128} << 20;

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
inline int64_t ceil_div(int64_t x, int64_t m) { return (x + m - 1) / m; }

inline float to_f32(float x) { return x; }
inline float to_f32(BFloat16 x) { return bf16_to_f32(x.bits); }

// Sizes derived from the dims; the same for every target.
struct Geometry {
  explicit Geometry(const AttentionDims& d)
      : kv(d.kv_valid),
        nkb(ceil_div(d.kv_valid, kBlockK)),
        hd(d.head_dim),
        dv(round_up(d.head_dim, 16)),
        dpairs(ceil_div(d.head_dim, 2)),
        kpairs(round_up(d.head_dim, 32) / 2),
        last_key_bias(d.kv_last_repeat > 1
                          ? static_cast<float>(std::log(static_cast<double>(d.kv_last_repeat)) /
                                               static_cast<double>(d.scale))
                          : 0.0f) {}
  int64_t kv;      // keys that take part (kv_valid); the rest is never read
  int64_t nkb;     // key blocks
  int64_t hd;      // head_dim
  int64_t dv;      // head_dim padded to 16 lanes: width of packed V rows and of O
  int64_t dpairs;  // bf16 channel pairs holding data (head_dim rounded up to even, halved)
  int64_t kpairs;  // channel pairs of packed bf16 K and Q: dpairs padded to 16 (one AMX tile)
  // Added to the raw score of key kv - 1: ln(kv_last_repeat) / scale, which the softmax's factor
  // scale * log2(e) turns into a weight of kv_last_repeat. 0 when the count is 1.
  float last_key_bias;
};

// Applies g.last_key_bias to the score tile of the keys [j0, j0 + width) when it holds the last
// key: rows x width scores, row stride `ld`.
inline void add_last_key_bias(const Geometry& g, int64_t j0, int64_t width, int64_t rows,
                              float* scores, int64_t ld) {
  const int64_t j = g.kv - 1 - j0;
  if (g.last_key_bias == 0.0f || j < 0 || j >= width) return;
  for (int64_t i = 0; i < rows; ++i) scores[i * ld + j] += g.last_key_bias;
}

using ::vidax::amx_bf16_usable;
using ::vidax::bf16_dot_product_fast;
using ::vidax::cpu_has_avx512_bf16;

// Packed K/V buffer of the calling thread, kept from call to call: a denoising loop calls
// attention with the same shapes thousands of times, and a fresh multi-megabyte allocation
// would page-fault on every call. At most kPackBudgetBytes (or one head) per calling thread.
// Freed between phases by release_thread_scratch() (core/thread_scratch.h).
struct PackedBuffer {
  hwy::AlignedFreeUniquePtr<float[]> buffer;
  size_t capacity = 0;
};
inline float* packed_scratch(size_t floats) {
  thread_local ThreadScratch<PackedBuffer> scratch;
  PackedBuffer& s = scratch.value;
  if (s.capacity < floats) {
    s.buffer.reset();
    s.capacity = 0;
    s.buffer = hwy::AllocateAligned<float>(floats);
    if (!s.buffer) throw std::bad_alloc();
    s.capacity = floats;
  }
  return s.buffer.get();
}

// The running state of query rows from some row on: views into a Scratch.
struct RowState {
  float* m;       // running maximum (log2 domain)
  float* bm;      // maximum of the current key step
  float* alpha;   // 2^(old m - new m)
  float* lsum;    // partial row sums, one 16-float vector per row
  float* o;       // unnormalised output, dv floats per row
  int64_t width;  // keys per softmax step (row length of the score tiles)
};

// Per-thread working memory of one task; carved from one aligned allocation, every piece a
// multiple of 16 floats so that all of them stay 64-byte aligned. `width` is the number of keys
// per softmax step (the row length of the score tile), a multiple of 32. Score and P tiles come
// twice, for kernels that overlap one step's softmax with the next step's products.
struct Scratch {
  Scratch(const Geometry& g, int64_t block_q, int64_t width) : width(width), dv(g.dv) {
    const int64_t bq = round_up(block_q, 16);
    const int64_t sizes[] = {bq * round_up(g.hd, 32),  // q rows (f32, or bf16 padded to kpairs)
                             2 * bq * width,           // scores, then P (f32)
                             2 * bq * width / 2,       // P as bf16
                             bq * g.dv,                // O
                             bq * 16,                  // partial row sums, one vector per row
                             bq,                       // m
                             bq,                       // block max
                             bq};                      // alpha
    int64_t total = 0;
    for (int64_t size : sizes) total += size;
    buffer = hwy::AllocateAligned<float>(static_cast<size_t>(total));
    // Inside a parallel region, where an exception cannot propagate.
    VIDAX_CHECK(buffer != nullptr, "attention: out of memory for ", total, " floats of scratch");
    float* p = buffer.get();
    float** slots[] = {&q, &s, &p16_storage, &o, &lsum, &m, &bm, &alpha};
    for (size_t i = 0; i < std::size(slots); ++i) {
      *slots[i] = p;
      p += sizes[i];
    }
    s_stride = bq * width;
  }
  RowState at(int64_t row) const {
    return {m + row, bm + row, alpha + row, lsum + 16 * row, o + row * dv, width};
  }
  uint16_t* q16() const { return reinterpret_cast<uint16_t*>(q); }
  float* scores(int64_t copy) const { return s + copy * s_stride; }
  uint16_t* p16(int64_t copy = 0) const {
    return reinterpret_cast<uint16_t*>(p16_storage) + copy * s_stride;
  }

  int64_t width, dv;
  int64_t s_stride = 0;
  hwy::AlignedFreeUniquePtr<float[]> buffer;
  float* q = nullptr;
  float* s = nullptr;
  float* p16_storage = nullptr;
  float* o = nullptr;
  float* lsum = nullptr;
  float* m = nullptr;
  float* bm = nullptr;
  float* alpha = nullptr;
};

}  // namespace vidax::fa
#endif  // VIDAX_KERNELS_CPU_FLASH_ATTENTION_SHARED_

HWY_BEFORE_NAMESPACE();
namespace vidax {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using fa::Geometry;
using fa::kBlockK;
using fa::RowState;
using fa::Scratch;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

#undef VIDAX_FA_AVX512
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#define VIDAX_FA_AVX512 1
constexpr int kR = 6;  // 6 rows x 4 vectors = 24 accumulators of the 32 zmm registers
constexpr int kC = 4;  // vectors per register-tile row
#else
#define VIDAX_FA_AVX512 0
// 6 rows x 2 vectors = 12 accumulators + 2 operands + 1 broadcast of the 16 ymm registers: 12
// independent FMA chains cover the 4-cycle latency of two FMA ports with margin. Measured on a
// Zen 3 (AVX2) VM against 2 x 4 (8 chains, the previous choice) and 5 x 2: self-attention of
// 1,950 tokens 19-23% faster (docs/kernels.md, Performance).
constexpr int kR = 6;
constexpr int kC = 2;
#endif
constexpr int64_t kBlockQ = int64_t{kR} * (64 / kR);  // query rows per task (60)
constexpr int64_t kLanes = hn::MaxLanes(DF());        // f32 lanes per vector

// Calls f(std::integral_constant<int, n>()) for a run-time 1 <= n <= M, so that register tiles
// can be instantiated for every remainder size.
template <int M, class F>
HWY_INLINE void with_count(int64_t n, F&& f) {
  if constexpr (M > 1) {
    if (n < M) return with_count<M - 1>(n, f);
  }
  f(std::integral_constant<int, M>());
}

// Taylor coefficient (ln 2)^k / k! of 2^f = e^(f ln 2).
constexpr float Exp2Coefficient(int k) {
  double c = 1.0;
  for (int i = 1; i <= k; ++i) c *= 0.69314718055994531 / i;
  return static_cast<float>(c);
}

// 2^x for x <= 0 (scores minus their running maximum). Range reduction x = n + f with
// n = round(x), |f| <= 1/2, then the Taylor polynomial of 2^f scaled by 2^n. Degree 7
// (truncation error < 1e-8 relative) is accurate to about 1 ulp; degree 4 (< 5e-5) is plenty
// where P is rounded to bf16 next. Results below 2^-126 flush to 0, and x = -inf (a row's
// maximum before its first block) gives 0, unless kFinite: that promises finite x and lets
// AVX-512 skip the clamping (vscalefps scales by any 2^n, underflowing gradually to 0).
template <int kDegree = 7, bool kFinite = false>
HWY_INLINE VF Exp2(DF df, VF x) {
  const VF lo = hn::Set(df, -126.0f);
  const VF xc = (kFinite && VIDAX_FA_AVX512) ? x : hn::Max(x, lo);
  const VF n = hn::Round(xc);
  const VF f = hn::Sub(xc, n);  // exact
  VF p = hn::Set(df, Exp2Coefficient(kDegree));
  for (int k = kDegree - 1; k >= 0; --k) p = hn::MulAdd(p, f, hn::Set(df, Exp2Coefficient(k)));
#if VIDAX_FA_AVX512
  // (The maskz form sidesteps GCC 12's false -Wmaybe-uninitialized on _mm512_undefined_ps.)
  const VF r{_mm512_maskz_scalef_ps(0xFFFF, p.raw, n.raw)};
  if constexpr (kFinite) return r;
#else
  // p is in [0.7, 1.5): adding n to its exponent field scales by 2^n; n >= -126 stays normal.
  const hn::RebindToSigned<DF> di;
  const VF r =
      hn::BitCast(df, hn::Add(hn::BitCast(di, p), hn::ShiftLeft<23>(hn::ConvertTo(di, n))));
#endif
  return hn::IfThenZeroElse(hn::Lt(x, lo), r);
}

// ------------------------------------------------------------------------------ packing

// One key block of head h widened to f32: kt[c][j] = k[j][c] (transposed so that one vector
// load gives one channel of consecutive keys). Keys past kv_valid are zero.
template <class T>
void PackKTransposed(const T* k, const AttentionDims& d, const Geometry& g, int64_t h, int64_t kb,
                     float* kt) {
  const int64_t j0 = kb * kBlockK, n = std::min(kBlockK, g.kv - j0);
  for (int64_t j = 0; j < kBlockK; ++j) {
    if (j < n) {
      const T* krow = k + (j0 + j) * d.k_stride + h * g.hd;
      for (int64_t c = 0; c < g.hd; ++c) kt[c * kBlockK + j] = fa::to_f32(krow[c]);
    } else {
      for (int64_t c = 0; c < g.hd; ++c) kt[c * kBlockK + j] = 0.0f;
    }
  }
}

// vp[j][c] = v[j][c] widened to f32, padded to dv channels; keys past kv_valid are zero.
template <class T>
void PackV(const T* v, const AttentionDims& d, const Geometry& g, int64_t h, int64_t kb,
           float* vp) {
  const int64_t j0 = kb * kBlockK, n = std::min(kBlockK, g.kv - j0);
  std::fill(vp, vp + kBlockK * g.dv, 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    const T* src = v + (j0 + j) * d.v_stride + h * g.hd;
    for (int64_t c = 0; c < g.hd; ++c) vp[j * g.dv + c] = fa::to_f32(src[c]);
  }
}

// ------------------------------------------------------------------------ f32 register tiles

// S[r][j] = sum_c Q[r][c] Kt[c][j] for R query rows and the kBlockK keys of a block.
template <int R>
HWY_INLINE void ScoreTileF32(const float* HWY_RESTRICT q, int64_t q_ld,
                             const float* HWY_RESTRICT kt, int64_t hd, float* HWY_RESTRICT s) {
  const DF df;
  for (int64_t j0 = 0; j0 < kBlockK; j0 += kC * kLanes) {
    VF acc[R][kC];
    for (int r = 0; r < R; ++r) {
      for (int i = 0; i < kC; ++i) acc[r][i] = hn::Zero(df);
    }
    const float* kp = kt + j0;
    for (int64_t c = 0; c < hd; ++c, kp += kBlockK) {
      VF kv[kC];
      for (int i = 0; i < kC; ++i) kv[i] = hn::Load(df, kp + i * kLanes);
      for (int r = 0; r < R; ++r) {
        const VF qb = hn::Set(df, q[r * q_ld + c]);
        for (int i = 0; i < kC; ++i) acc[r][i] = hn::MulAdd(qb, kv[i], acc[r][i]);
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int i = 0; i < kC; ++i) hn::Store(acc[r][i], df, s + r * kBlockK + j0 + i * kLanes);
    }
  }
}

// O[r][:] = alpha[r] O[r][:] + sum_j P[r][j] V[j][:] over C vectors of channels.
template <int R, int C>
HWY_INLINE void PvTileF32(const float* HWY_RESTRICT p, const float* HWY_RESTRICT alpha,
                          const float* HWY_RESTRICT v, int64_t dv, int64_t nkeys,
                          float* HWY_RESTRICT o) {
  const DF df;
  VF acc[R][C];
  for (int r = 0; r < R; ++r) {
    const VF a = hn::Set(df, alpha[r]);
    for (int i = 0; i < C; ++i) acc[r][i] = hn::Mul(hn::Load(df, o + r * dv + i * kLanes), a);
  }
  for (int64_t j = 0; j < nkeys; ++j) {
    VF vv[C];
    for (int i = 0; i < C; ++i) vv[i] = hn::Load(df, v + j * dv + i * kLanes);
    for (int r = 0; r < R; ++r) {
      const VF pb = hn::Set(df, p[r * kBlockK + j]);
      for (int i = 0; i < C; ++i) acc[r][i] = hn::MulAdd(pb, vv[i], acc[r][i]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < C; ++i) hn::Store(acc[r][i], df, o + r * dv + i * kLanes);
  }
}

// ------------------------------------------------------------------------------ online softmax

// Resets the statistics and the output accumulator of a task's rows, and of the padding up to
// `padded_rows` (a multiple of 16 lanes; padded rows can enter vector and tile operations).
HWY_INLINE void StartRows(int64_t padded_rows, const Scratch& s) {
  std::fill(s.m, s.m + padded_rows, -std::numeric_limits<float>::infinity());
  std::fill(s.bm, s.bm + padded_rows, -std::numeric_limits<float>::infinity());
  std::fill(s.lsum, s.lsum + padded_rows * 16, 0.0f);
  std::fill(s.o, s.o + padded_rows * s.dv, 0.0f);
}

// Lanes [j0, j0 + kLanes) that hold keys < valid.
HWY_INLINE hn::Mask<DF> ValidKeys(int64_t j0, int64_t valid) {
  return hn::FirstN(DF(), static_cast<size_t>(std::clamp<int64_t>(valid - j0, 0, kLanes)));
}

// Called after each row of a softmax step; kernels that overlap other work with the softmax
// pass a hook that issues it.
struct NoHook {
  void operator()() const {}
};

// Row maxima of the scores in the log2 domain, t = s * c with c = scale * log2(e), over the
// first `valid` keys of the s.width-wide tile `sb`, into bm: max(s) * c, or min(s) * c if c < 0.
template <bool kPositive, class Hook>
HWY_INLINE void RowMaxT(int64_t rows, int64_t valid, float c, const float* sb, const RowState& s,
                        Hook& hook) {
  const DF df;
  const VF init = hn::Set(df, (kPositive ? -1.0f : 1.0f) * std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < rows; ++i) {
    const float* si = sb + i * s.width;
    VF mx = init;
    for (int64_t j0 = 0; j0 < s.width; j0 += kLanes) {
      VF t = hn::Load(df, si + j0);
      if (j0 + kLanes > valid) t = hn::IfThenElse(ValidKeys(j0, valid), t, init);
      mx = kPositive ? hn::Max(mx, t) : hn::Min(mx, t);
    }
    const VF r = kPositive ? hn::MaxOfLanes(df, mx) : hn::MinOfLanes(df, mx);
    s.bm[i] = hn::GetLane(r) * c;
    hook();
  }
}

template <class Hook = NoHook>
HWY_INLINE void RowMax(int64_t rows, int64_t valid, float c, const float* sb, const RowState& s,
                       Hook&& hook = Hook()) {
  if (c >= 0) return RowMaxT<true>(rows, valid, c, sb, s, hook);
  RowMaxT<false>(rows, valid, c, sb, s, hook);
}

// m' = max(m, block max); alpha = 2^(m - m') rescales what was accumulated with the old maximum
// (0 on the first block, where m = -inf). Every block holds at least one valid key, so m' is
// finite for finite inputs.
HWY_INLINE void UpdateRowMax(int64_t rows, float* HWY_RESTRICT m, const float* HWY_RESTRICT bm,
                             float* HWY_RESTRICT alpha) {
  const DF df;
  for (int64_t i = 0; i < rows; i += kLanes) {
    const VF old = hn::Load(df, m + i);
    const VF now = hn::Max(old, hn::Load(df, bm + i));
    hn::Store(Exp2(df, hn::Sub(old, now)), df, alpha + i);
    hn::Store(now, df, m + i);
  }
}

// P = 2^(s c - m') in place (f32; 0 for keys >= valid), partial row sums l = alpha l + P kept
// as one vector per row.
HWY_INLINE void ExpRowsF32(int64_t rows, int64_t valid, float c, float* sb, const RowState& s) {
  const DF df;
  const VF vc = hn::Set(df, c);
  for (int64_t i = 0; i < rows; ++i) {
    float* si = sb + i * s.width;
    const VF mi = hn::Set(df, s.m[i]);
    VF acc = hn::Mul(hn::Load(df, s.lsum + i * 16), hn::Set(df, s.alpha[i]));
    for (int64_t j0 = 0; j0 < s.width; j0 += kLanes) {
      VF p = Exp2<7, true>(df, hn::MulSub(hn::Load(df, si + j0), vc, mi));
      if (j0 + kLanes > valid) p = hn::IfThenElseZero(ValidKeys(j0, valid), p);
      hn::Store(p, df, si + j0);
      acc = hn::Add(acc, p);
    }
    hn::Store(acc, df, s.lsum + i * 16);
  }
}

// out[i][c] = O[i][c] / l[i] for the task's rows; with `lse` (row stride `lse_stride`) also each
// row's log-sum-exp: the running maximum m is in the scaled log2 domain (p = 2^(s*c - m)), so
// ln(sum_j e^(scale s_j)) = (m + log2 l) * ln 2.
HWY_INLINE void FinishRows(int64_t rows, const Geometry& g, const RowState& s, float* out,
                           int64_t out_stride, float* lse = nullptr, int64_t lse_stride = 0) {
  const DF df;
  for (int64_t i = 0; i < rows; ++i) {
    const float l = hn::GetLane(hn::SumOfLanes(df, hn::Load(df, s.lsum + i * 16)));
    if (lse != nullptr)
      lse[i * lse_stride] = static_cast<float>(
          (static_cast<double>(s.m[i]) + std::log2(static_cast<double>(l))) * 0.6931471805599453);
    const float inv = 1.0f / l;
    const float* oi = s.o + i * g.dv;
    float* dst = out + i * out_stride;
    int64_t c = 0;
    for (; c + kLanes <= g.hd; c += kLanes) {
      hn::StoreU(hn::Mul(hn::Load(df, oi + c), hn::Set(df, inv)), df, dst + c);
    }
    for (; c < g.hd; ++c) dst[c] = oi[c] * inv;
  }
}

// ------------------------------------------------------------------------------ driver

// Runs pack(h, kb, k_dst, v_dst) for every key block and task(h, q0, rows, k_head, v_head,
// scratch) for every (head, query block), over groups of heads. Packed blocks are k_block and
// v_block 32-bit elements. Tasks cover block_q query rows, or fewer (multiples of min_block_q)
// when that is needed to give every thread a few tasks. Each thread's scratch holds `width`-key
// score rows.
template <class Pack, class Task>
void RunBlocked(const AttentionDims& d, const Geometry& g, int64_t k_block, int64_t v_block,
                int64_t block_q, int64_t min_block_q, int64_t width, const Pack& pack,
                const Task& task) {
  const int64_t head_elems = g.nkb * (k_block + v_block);
  const int64_t group = std::clamp<int64_t>(fa::kPackBudgetBytes / (head_elems * 4), 1, d.heads);
  float* base = fa::packed_scratch(static_cast<size_t>(group * head_elems));
  const int64_t threads = omp_get_max_threads();
  while (block_q > min_block_q && group * fa::ceil_div(d.q_len, block_q) < 4 * threads) {
    block_q = std::max(min_block_q, fa::round_up(block_q / 2, min_block_q));
  }
  const int64_t nqb = fa::ceil_div(d.q_len, block_q);
  for (int64_t h0 = 0; h0 < d.heads; h0 += group) {
    const int64_t hg = std::min(group, d.heads - h0);
#pragma omp parallel
    {
#pragma omp for schedule(static)
      for (int64_t t = 0; t < hg * g.nkb; ++t) {
        const int64_t hl = t / g.nkb, kb = t % g.nkb;
        float* head = base + hl * head_elems;
        pack(h0 + hl, kb, head + kb * k_block, head + g.nkb * k_block + kb * v_block);
      }
      const Scratch scratch(g, block_q, width);
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = 0; t < hg * nqb; ++t) {
        const int64_t hl = t / nqb, q0 = (t % nqb) * block_q;
        const float* head = base + hl * head_elems;
        task(h0 + hl, q0, std::min(block_q, d.q_len - q0), head, head + g.nkb * k_block, scratch);
      }
    }
  }
}

// One (head, query block) task on f32 (or widened bf16) packed blocks.
template <class T>
void TaskWidened(const AttentionDims& d, const Geometry& g, const T* q, float* out, int64_t h,
                 int64_t q0, int64_t rows, const float* kt_head, const float* v_head,
                 const Scratch& s) {
  const int64_t hd = g.hd, dv = g.dv, nvec = dv / kLanes;
  for (int64_t i = 0; i < rows; ++i) {
    const T* src = q + (q0 + i) * d.q_stride + h * hd;
    for (int64_t c = 0; c < hd; ++c) s.q[i * hd + c] = fa::to_f32(src[c]);
  }
  StartRows(fa::round_up(rows, 16), s);
  const RowState st = s.at(0);
  const float c = static_cast<float>(static_cast<double>(d.scale) * fa::kLog2e);
  for (int64_t kb = 0; kb < g.nkb; ++kb) {
    const int64_t valid = std::min(kBlockK, g.kv - kb * kBlockK);
    const float* kt = kt_head + kb * hd * kBlockK;
    const float* vb = v_head + kb * kBlockK * dv;
    for (int64_t r0 = 0; r0 < rows; r0 += kR) {
      with_count<kR>(std::min<int64_t>(kR, rows - r0), [&](auto nr) {
        ScoreTileF32<decltype(nr)::value>(s.q + r0 * hd, hd, kt, hd, s.s + r0 * kBlockK);
      });
    }
    fa::add_last_key_bias(g, kb * kBlockK, kBlockK, rows, s.s, st.width);
    RowMax(rows, valid, c, s.s, st);
    UpdateRowMax(rows, s.m, s.bm, s.alpha);
    ExpRowsF32(rows, valid, c, s.s, st);
    for (int64_t r0 = 0; r0 < rows; r0 += kR) {
      with_count<kR>(std::min<int64_t>(kR, rows - r0), [&](auto nr) {
        for (int64_t c0 = 0; c0 < nvec; c0 += kC) {
          with_count<kC>(std::min<int64_t>(kC, nvec - c0), [&](auto nc) {
            PvTileF32<decltype(nr)::value, decltype(nc)::value>(s.s + r0 * kBlockK, s.alpha + r0,
                                                                vb + c0 * kLanes, dv, valid,
                                                                s.o + r0 * dv + c0 * kLanes);
          });
        }
      });
    }
  }
  FinishRows(rows, g, st, out + q0 * d.out_stride + h * hd, d.out_stride,
             d.lse != nullptr ? d.lse + q0 * d.heads + h : nullptr, d.heads);
}

#if VIDAX_FA_AVX512
#include "kernels/cpu/flash_attention_x86-inl.h"
#endif

template <class T>
void FlashWidened(const T* q, const T* k, const T* v, float* out, const AttentionDims& d) {
  const Geometry g(d);
  RunBlocked(
      d, g, g.hd * kBlockK, kBlockK * g.dv, kBlockQ, kR, kBlockK,
      [&](int64_t h, int64_t kb, float* kt, float* vp) {
#if VIDAX_FA_AVX512
        PackKTransposedAvx512(k, d, g, h, kb, kt);
#else
        PackKTransposed(k, d, g, h, kb, kt);
#endif
        PackV(v, d, g, h, kb, vp);
      },
      [&](int64_t h, int64_t q0, int64_t rows, const float* kt, const float* vp, const Scratch& s) {
        TaskWidened(d, g, q, out, h, q0, rows, kt, vp, s);
      });
}

// Kernel ids as ints (AttentionBf16Kernel) so that the exported functions stay plain.
bool Bf16KernelAvailable(int kernel) {
  switch (static_cast<AttentionBf16Kernel>(kernel)) {
    case AttentionBf16Kernel::kAuto:
    case AttentionBf16Kernel::kWidened:
      return true;
    case AttentionBf16Kernel::kAvx512Bf16:
      return VIDAX_FA_AVX512 && fa::cpu_has_avx512_bf16();
    case AttentionBf16Kernel::kAmx:
      return VIDAX_FA_AVX512 && fa::amx_bf16_usable();
  }
  return false;
}

int AutoBf16Kernel() {
  if (Bf16KernelAvailable(static_cast<int>(AttentionBf16Kernel::kAmx))) {
    return static_cast<int>(AttentionBf16Kernel::kAmx);
  }
  if (Bf16KernelAvailable(static_cast<int>(AttentionBf16Kernel::kAvx512Bf16)) &&
      fa::bf16_dot_product_fast()) {
    return static_cast<int>(AttentionBf16Kernel::kAvx512Bf16);
  }
  return static_cast<int>(AttentionBf16Kernel::kWidened);
}

void FlashF32(const float* q, const float* k, const float* v, float* out, const AttentionDims& d) {
  FlashWidened(q, k, v, out, d);
}

// `kernel` must be available (checked by the caller).
void FlashBf16(int kernel, const BFloat16* q, const BFloat16* k, const BFloat16* v, float* out,
               const AttentionDims& d) {
  if (kernel == static_cast<int>(AttentionBf16Kernel::kAuto)) kernel = AutoBf16Kernel();
#if VIDAX_FA_AVX512
  if (kernel == static_cast<int>(AttentionBf16Kernel::kAmx)) return FlashAmx(q, k, v, out, d);
  if (kernel == static_cast<int>(AttentionBf16Kernel::kAvx512Bf16)) {
    return FlashDpBf16(q, k, v, out, d);
  }
#endif
  FlashWidened(q, k, v, out, d);
}

int64_t ChosenTarget() { return HWY_TARGET; }

// The block-sparse executor shares this translation unit to reuse the pieces above.
#include "kernels/cpu/block_sparse_attention-inl.h"

}  // namespace HWY_NAMESPACE
}  // namespace vidax
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace vidax {

HWY_EXPORT(FlashF32);
HWY_EXPORT(FlashBf16);
HWY_EXPORT(Bf16KernelAvailable);
HWY_EXPORT(AutoBf16Kernel);
HWY_EXPORT(ChosenTarget);
HWY_EXPORT(BlockSparseRun);

namespace detail {
void block_sparse_dispatch(int kernel, const void* q, const void* k, const void* v, float* out,
                           const BlockPartition& q_blocks, const BlockPartition& k_blocks,
                           const BlockMask& mask, const TilePredicate& predicate,
                           const BlockSparseDims& d, const BlockSparseOutput& o,
                           const BlockSparseInput& in) {
  HWY_DYNAMIC_DISPATCH(BlockSparseRun)
  (kernel, q, k, v, out, q_blocks, k_blocks, mask, predicate, d, o, in);
}
}  // namespace detail

void validate_attention_dims(const AttentionDims& d) {
  if (d.q_len < 0) VIDAX_INTERNAL_ERROR("attention: q_len must be >= 0, got ", d.q_len);
  if (d.kv_len < 1) VIDAX_INTERNAL_ERROR("attention: kv_len must be >= 1, got ", d.kv_len);
  if (d.kv_valid < 1 || d.kv_valid > d.kv_len) {
    VIDAX_INTERNAL_ERROR("attention: kv_valid must be in [1, kv_len=", d.kv_len, "], got ",
                         d.kv_valid);
  }
  if (d.heads < 1) VIDAX_INTERNAL_ERROR("attention: heads must be >= 1, got ", d.heads);
  if (d.head_dim < 1) VIDAX_INTERNAL_ERROR("attention: head_dim must be >= 1, got ", d.head_dim);
  const int64_t row = d.heads * d.head_dim;
  const struct {
    const char* name;
    int64_t stride, rows;
  } strides[] = {{"q_stride", d.q_stride, d.q_len},
                 {"k_stride", d.k_stride, d.kv_valid},
                 {"v_stride", d.v_stride, d.kv_valid},
                 {"out_stride", d.out_stride, d.q_len}};
  for (const auto& s : strides) {
    if (s.rows > 1 && s.stride < row) {
      VIDAX_INTERNAL_ERROR("attention: ", s.name, " must be >= heads*head_dim=", row, ", got ",
                           s.stride);
    }
  }
  if (!std::isfinite(d.scale)) VIDAX_INTERNAL_ERROR("attention: scale must be finite");
  if (d.kv_last_repeat < 1)
    VIDAX_INTERNAL_ERROR("attention: kv_last_repeat must be >= 1, got ", d.kv_last_repeat);
  if (d.kv_last_repeat > 1 && d.scale == 0.0f)
    VIDAX_INTERNAL_ERROR("attention: kv_last_repeat > 1 needs a non-zero scale");
}

namespace {
void check_pointers(const void* q, const void* k, const void* v, const void* out) {
  if (!q || !k || !v || !out) VIDAX_INTERNAL_ERROR("attention: null q, k, v or out pointer");
}
}  // namespace

void flash_attention(const float* q, const float* k, const float* v, float* out,
                     const AttentionDims& d) {
  validate_attention_dims(d);
  check_pointers(q, k, v, out);
  if (d.q_len == 0) return;
  HWY_DYNAMIC_DISPATCH(FlashF32)(q, k, v, out, d);
}

void flash_attention(const BFloat16* q, const BFloat16* k, const BFloat16* v, float* out,
                     const AttentionDims& d) {
  flash_attention_bf16(AttentionBf16Kernel::kAuto, q, k, v, out, d);
}

bool flash_attention_bf16_available(AttentionBf16Kernel kernel) {
  return HWY_DYNAMIC_DISPATCH(Bf16KernelAvailable)(static_cast<int>(kernel));
}

void flash_attention_bf16(AttentionBf16Kernel kernel, const BFloat16* q, const BFloat16* k,
                          const BFloat16* v, float* out, const AttentionDims& d) {
  validate_attention_dims(d);
  check_pointers(q, k, v, out);
  if (!flash_attention_bf16_available(kernel)) {
    VIDAX_INTERNAL_ERROR("attention: bf16 kernel #", static_cast<int>(kernel),
                         " is not available on this machine (", flash_attention_target(), ")");
  }
  if (d.q_len == 0) return;
  HWY_DYNAMIC_DISPATCH(FlashBf16)(static_cast<int>(kernel), q, k, v, out, d);
}

AttentionBf16Kernel auto_bf16_attention_kernel() {
  return static_cast<AttentionBf16Kernel>(HWY_DYNAMIC_DISPATCH(AutoBf16Kernel)());
}

std::string flash_attention_target() {
  static const char* kNames[] = {"auto", "widened", "avx512bf16", "amx"};
  return str_cat(hwy::TargetName(HWY_DYNAMIC_DISPATCH(ChosenTarget)()),
                 ", bf16: ", kNames[HWY_DYNAMIC_DISPATCH(AutoBf16Kernel)()]);
}

}  // namespace vidax
#endif  // HWY_ONCE
