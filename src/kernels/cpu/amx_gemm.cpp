#include "kernels/cpu/amx_gemm.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/convert.h"
#include "core/error.h"
#include "core/thread_scratch.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/elementwise.h"

// GCC 12 warns inside its own AVX-512 intrinsic headers (their _mm512_undefined_* helpers).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// Functions using AMX or AVX-512 intrinsics; only reached after amx_bf16_usable().
#define VIDAX_AMX \
  __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16,avx512vbmi")))
// GCC 12's tile load/store builtins do not tell the compiler that they read or write memory; a
// barrier between them and ordinary accesses to the same buffers keeps the order.
#define VIDAX_AMX_BARRIER() asm volatile("" ::: "memory")

namespace vidax {
namespace {

constexpr int64_t kTileElems = 16 * 32;         // bf16 per A or B tile (16 rows x 64 bytes)
constexpr int64_t kStepElems = 2 * kTileElems;  // two tiles per 32-deep K step
constexpr int64_t kMaxBlockSubs = 8;            // M block: up to 8 x 32 = 256 rows
constexpr int64_t kMaxChunkBytes = 1 << 20;     // packed A block per thread (L2 resident)
constexpr int64_t kPrefetchRows = 8;            // f32 A rows prefetched ahead while packing

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Palette 1, tiles 0-7 all 16 rows x 64 bytes: 0-3 C (f32), 4-5 A, 6-7 B.
struct alignas(64) TileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
  TileConfig() {
    for (int t = 0; t < 8; ++t) {
      colsb[t] = 64;
      rows[t] = 16;
    }
  }
};

// A per-thread buffer that only grows, 64-byte aligned, reused across calls.
struct ThreadBuffer {
  void* p = nullptr;
  size_t bytes = 0;
  ThreadBuffer() = default;
  ThreadBuffer& operator=(ThreadBuffer&& o) noexcept {
    std::swap(p, o.p);
    std::swap(bytes, o.bytes);
    return *this;
  }
  ~ThreadBuffer() { std::free(p); }
  void* get(size_t want) {
    if (want > bytes) {
      std::free(p);
      bytes = (want + 63) / 64 * 64;
      p = std::aligned_alloc(64, bytes);
      VIDAX_CHECK(p != nullptr, "out of memory for AMX GEMM buffers (", bytes, " bytes)");
    }
    return p;
  }
};

// Round to nearest even; NaN stays a quiet NaN (as f32_to_bf16).
VIDAX_AMX inline __m256i to_bf16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r =
      _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(r);
}

// 32 consecutive values of row `src` from column c, `valid` of them real (the rest zero), as
// bf16: loaded as is from bf16, rounded to nearest even from f32.
VIDAX_AMX inline __m512i load_k_step(const BFloat16* src, int64_t valid) {
  const auto* p = reinterpret_cast<const uint16_t*>(src);
  if (valid == 32) return _mm512_loadu_si512(p);
  return _mm512_maskz_loadu_epi16(static_cast<__mmask32>((1ull << valid) - 1), p);
}
VIDAX_AMX inline __m512i load_k_step(const float* src, int64_t valid) {
  const auto m0 = static_cast<__mmask16>(valid >= 16 ? 0xffff : (1u << valid) - 1);
  const auto m1 = static_cast<__mmask16>(valid >= 32   ? 0xffff
                                         : valid <= 16 ? 0
                                                       : (1u << (valid - 16)) - 1);
  const __m256i lo = to_bf16(_mm512_maskz_loadu_ps(m0, src));
  const __m256i hi = to_bf16(_mm512_maskz_loadu_ps(m1, src + 16));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// Copies rows [r0, r0 + rows) x K steps [s0, s0 + steps) of x into the A-tile layout
// [subs][steps][2 tiles][16 rows][32], zero-filling rows >= `rows` and columns >= k (f32 x is
// rounded to bf16 here, so f32 activations need no separate conversion pass).
template <typename X>
VIDAX_AMX void pack_a(const X* x, int64_t x_stride, int64_t k, int64_t r0, int64_t rows,
                      int64_t subs, int64_t s0, int64_t steps, uint16_t* dst) {
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t sub = 0; sub < subs; ++sub) {
    for (int64_t rr = 0; rr < 32; ++rr) {
      const int64_t r = sub * 32 + rr;
      uint16_t* d = dst + sub * steps * kStepElems + (rr / 16) * kTileElems + (rr % 16) * 32;
      if (r >= rows) {
        for (int64_t s = 0; s < steps; ++s) _mm512_store_si512(d + s * kStepElems, zero);
        continue;
      }
      const X* src = x + (r0 + r) * x_stride;
      if constexpr (std::is_same_v<X, float>) {
        // f32 rows are often short pieces of a wide strided buffer (one head's keys): each starts
        // a new page, where the hardware prefetcher does not follow, so fetch a few rows ahead.
        if (r + kPrefetchRows < rows) {
          const char* ahead =
              reinterpret_cast<const char*>(src + kPrefetchRows * x_stride + s0 * 32);
          const int64_t bytes = std::min<int64_t>(steps * 32, k - s0 * 32) * 4;
          for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(ahead + b, _MM_HINT_T0);
        }
      }
      for (int64_t s = 0; s < steps; ++s) {
        const int64_t c = (s0 + s) * 32;
        const int64_t valid = std::min<int64_t>(32, k - c);
        const __m512i v = valid > 0 ? load_k_step(src + c, valid) : zero;
        _mm512_store_si512(d + s * kStepElems, v);
      }
    }
  }
}

// 16 lanes of gelu(approximate='tanh') = x sigmoid(2u), u = c (x + a x^3) with PyTorch's f32
// constants, evaluated in double (8 lanes at a time) and rounded to f32 once: the exponential's
// argument carries no f32 rounding (which exp would amplify by 2|u|), so the result is within
// ~0.5 ulp of the exact function. exp(-2u) = 2^n e^r (|r| <= ln2/2, Taylor degree 9, 2e-11
// relative); 1 / (1 + t) by rcp14 and two Newton steps. NaN propagates; gelu(-inf) gives -0.
VIDAX_AMX inline __m512d gelu_tanh_pd(__m512d x) {
  const __m512d a = _mm512_set1_pd(static_cast<double>(0.044715f));
  const __m512d m2c = _mm512_set1_pd(-2.0 * static_cast<double>(0.797884561f));
  const __m512d one = _mm512_set1_pd(1.0);
  __m512d z = _mm512_mul_pd(_mm512_mul_pd(x, m2c), _mm512_fmadd_pd(a, _mm512_mul_pd(x, x), one));
  z = _mm512_min_pd(_mm512_set1_pd(700.0), _mm512_max_pd(_mm512_set1_pd(-1000.0), z));
  const __m512d n = _mm512_roundscale_pd(_mm512_mul_pd(z, _mm512_set1_pd(1.4426950408889634)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(0.6931471805599453), z);
  // Horner for sum_{i<=9} r^i / i!
  __m512d p = _mm512_set1_pd(1.0 / 362880.0);
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 40320.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 5040.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 720.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 120.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 24.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 6.0));
  p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(0.5));
  p = _mm512_fmadd_pd(p, r, one);
  p = _mm512_fmadd_pd(p, r, one);
  const __m512d d = _mm512_add_pd(one, _mm512_scalef_pd(p, n));  // 1 + exp(-2u)
  __m512d q = _mm512_rcp14_pd(d);
  q = _mm512_mul_pd(q, _mm512_fnmadd_pd(d, q, _mm512_set1_pd(2.0)));
  q = _mm512_mul_pd(q, _mm512_fnmadd_pd(d, q, _mm512_set1_pd(2.0)));
  return _mm512_mul_pd(x, q);
}

VIDAX_AMX inline __m512 gelu_tanh_ps(__m512 x) {
  const __m256 lo = _mm512_castps512_ps256(x);
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1));
  const __m256 rlo = _mm512_cvtpd_ps(gelu_tanh_pd(_mm512_cvtps_pd(lo)));
  const __m256 rhi = _mm512_cvtpd_ps(gelu_tanh_pd(_mm512_cvtps_pd(hi)));
  return _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(rlo)), _mm256_castps_pd(rhi), 1));
}

struct Output {
  float* f32 = nullptr;
  BFloat16* bf16 = nullptr;
  int64_t n = 0;  // row stride
};

// A finished 32x32 block whose epilogue (bias, GELU, conversion, stores) is still to be done,
// row by row, while the tile unit computes the next block.
struct PendingBlock {
  float* c = nullptr;  // 32x32 f32, row stride 32; null: nothing pending
  int64_t next = 0, rows = 0, cols = 0, r0 = 0, n0 = 0;
};

struct EpilogueArgs {
  const float* scale = nullptr;  // fp8 weights: acc * scale + bias
  const float* bias = nullptr;
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  Output out;
};

// Epilogue of rows [pb.next, pb.next + count) of the pending block.
VIDAX_AMX inline void epilogue_rows(PendingBlock& pb, int64_t count, const EpilogueArgs& ea) {
  const int64_t end = std::min(pb.rows, pb.next + count);
  const int64_t cols = pb.cols;
  const __mmask16 m0 = static_cast<__mmask16>(cols >= 16 ? 0xffff : (1u << cols) - 1);
  const __mmask16 m1 = static_cast<__mmask16>(cols >= 32   ? 0xffff
                                              : cols <= 16 ? 0
                                                           : (1u << (cols - 16)) - 1);
  __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
  if (ea.bias != nullptr) {
    b0 = _mm512_maskz_loadu_ps(m0, ea.bias + pb.n0);
    b1 = _mm512_maskz_loadu_ps(m1, ea.bias + pb.n0 + 16);
  }
  __m512 s0 = _mm512_set1_ps(1.0f), s1 = s0;
  if (ea.scale != nullptr) {
    s0 = _mm512_maskz_loadu_ps(m0, ea.scale + pb.n0);
    s1 = _mm512_maskz_loadu_ps(m1, ea.scale + pb.n0 + 16);
  }
  for (int64_t r = pb.next; r < end; ++r) {
    float* row = pb.c + r * 32;
    __m512 v0, v1;
    if (ea.scale != nullptr) {
      v0 = _mm512_fmadd_ps(_mm512_load_ps(row), s0, b0);
      v1 = _mm512_fmadd_ps(_mm512_load_ps(row + 16), s1, b1);
    } else {
      v0 = _mm512_add_ps(_mm512_load_ps(row), b0);
      v1 = _mm512_add_ps(_mm512_load_ps(row + 16), b1);
    }
    if (ea.epilogue == GemmEpilogue::kGeluTanh) {
      v0 = gelu_tanh_ps(v0);
      v1 = gelu_tanh_ps(v1);
    } else if (ea.epilogue == GemmEpilogue::kGeluErf) {
      _mm512_store_ps(row, v0);
      _mm512_store_ps(row + 16, v1);
      gelu_erf(row, row, 32);
      v0 = _mm512_load_ps(row);
      v1 = _mm512_load_ps(row + 16);
    }
    const int64_t at = (pb.r0 + r) * ea.out.n + pb.n0;
    if (ea.out.f32 != nullptr) {
      _mm512_mask_storeu_ps(ea.out.f32 + at, m0, v0);
      _mm512_mask_storeu_ps(ea.out.f32 + at + 16, m1, v1);
    } else {
      _mm256_mask_storeu_epi16(ea.out.bf16 + at, m0, to_bf16(v0));
      _mm256_mask_storeu_epi16(ea.out.bf16 + at + 16, m1, to_bf16(v1));
    }
  }
  pb.next = end;
}

// fp8 codes to bf16, 64 at a time (`count` a multiple of 64), through two 128-entry byte tables
// (the low and high bytes of the bf16 value of each magnitude; vpermi2b looks up 64 codes at
// once) and the code's sign bit, which is the bf16 sign bit's place in the high byte. The
// byte interleave (unpack within 128-bit lanes) writes words in the order the codes were stored
// in (AmxPackedWeight::fp8 permutes each 64-code group for it: fp8_group_position).
VIDAX_AMX void widen_codes(const uint8_t* codes, int64_t count, const uint8_t* table,
                           uint16_t* dst) {
  const __m512i lo0 = _mm512_loadu_si512(table), lo1 = _mm512_loadu_si512(table + 64);
  const __m512i hi0 = _mm512_loadu_si512(table + 128), hi1 = _mm512_loadu_si512(table + 192);
  const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t i = 0; i < count; i += 64) {
    const __m512i c = _mm512_loadu_si512(codes + i);
    const __m512i lo = _mm512_permutex2var_epi8(lo0, c, lo1);
    const __m512i hi =
        _mm512_or_si512(_mm512_permutex2var_epi8(hi0, c, hi1), _mm512_and_si512(c, sign));
    _mm512_store_si512(dst + i, _mm512_unpacklo_epi8(lo, hi));
    _mm512_store_si512(dst + i + 32, _mm512_unpackhi_epi8(lo, hi));
  }
}

// One 32-deep K step of a 32x32 block: C tiles 0-3 += A tiles (a) x B tiles (b).
VIDAX_AMX inline void tile_step(const uint16_t* a, const uint16_t* b) {
  _tile_loadd(4, a, 64);
  _tile_loadd(6, b, 64);
  _tile_loadd(5, a + kTileElems, 64);
  _tile_dpbf16ps(0, 4, 6);
  _tile_loadd(7, b + kTileElems, 64);
  _tile_dpbf16ps(2, 5, 6);
  _tile_dpbf16ps(1, 4, 7);
  _tile_dpbf16ps(3, 5, 7);
}

// c (32x32 f32, row stride 32) = or += a[steps] x b[steps]: 2 A tiles x 2 B tiles per step.
// Meanwhile the previous block's epilogue (pb) runs a few rows per K step on the vector units,
// overlapping the tile products; pb is complete (and cleared) before c is stored, so pb.c may
// be c itself.
VIDAX_AMX void tile_block(const uint16_t* a, const uint16_t* b, int64_t steps, float* c,
                          bool accumulate, PendingBlock& pb, const EpilogueArgs& ea) {
  VIDAX_AMX_BARRIER();
  if (accumulate) {
    _tile_loadd(0, c, 128);
    _tile_loadd(1, c + 16, 128);
    _tile_loadd(2, c + 16 * 32, 128);
    _tile_loadd(3, c + 16 * 32 + 16, 128);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  const int64_t per_step = pb.c != nullptr ? ceil_div(pb.rows - pb.next, steps) : 0;
  for (int64_t s = 0; s < steps; ++s) {
    tile_step(a, b);
    a += kStepElems;
    b += kStepElems;
    if (per_step > 0) epilogue_rows(pb, per_step, ea);
  }
  if (pb.c != nullptr) {
    epilogue_rows(pb, pb.rows, ea);
    pb.c = nullptr;
  }
  VIDAX_AMX_BARRIER();
  _tile_stored(0, c, 128);
  _tile_stored(1, c + 16, 128);
  _tile_stored(2, c + 16 * 32, 128);
  _tile_stored(3, c + 16 * 32 + 16, 128);
  VIDAX_AMX_BARRIER();
}

struct Plan {
  int64_t m = 0, subs = 0, m_blocks = 0, n_groups = 0;
  int64_t chunk_steps = 0, chunks = 0;
};

// One thread's share of the (M block, N group) tasks.
template <typename X>
VIDAX_AMX void run_thread(const Plan& plan, const X* x, int64_t x_stride, const AmxPackedWeight& w,
                          GemmEpilogue epilogue, const Output& out, int thread, int threads) {
  const int64_t tasks = plan.m_blocks * plan.n_groups;
  const int64_t t0 = tasks * thread / threads, t1 = tasks * (thread + 1) / threads;
  if (t0 >= t1) return;
  static thread_local ThreadScratch<ThreadBuffer> a_scratch, b_scratch, c_scratch;
  ThreadBuffer& a_buf = a_scratch.value;
  ThreadBuffer& c_buf = c_scratch.value;
  // fp8 weights: one panel's K chunk widened to bf16 (at most 64 steps: 128 KiB).
  auto* b_wide =
      w.is_fp8() ? static_cast<uint16_t*>(b_scratch.value.get(plan.chunk_steps * kStepElems * 2))
                 : nullptr;
  alignas(64) float scratch[32 * 32];
  const TileConfig config;
  PendingBlock pending;
  EpilogueArgs ea;
  ea.scale = w.column_scale();
  ea.bias = w.bias();
  ea.epilogue = epilogue;
  ea.out = out;
  VIDAX_AMX_BARRIER();
  _tile_loadconfig(&config);
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t mb = t / plan.n_groups, ng = t % plan.n_groups;
    const int64_t sub0 = plan.subs * mb / plan.m_blocks,
                  sub1 = plan.subs * (mb + 1) / plan.m_blocks;
    const int64_t subs = sub1 - sub0, r0 = sub0 * 32, rows = std::min(plan.m, sub1 * 32) - r0;
    const int64_t p0 = w.panels() * ng / plan.n_groups, p1 = w.panels() * (ng + 1) / plan.n_groups;
    // The pending block may live in c_buf, which get() below may reallocate.
    if (pending.c != nullptr && plan.chunks > 1) {
      epilogue_rows(pending, pending.rows, ea);
      pending.c = nullptr;
    }
    auto* a = static_cast<uint16_t*>(a_buf.get(subs * plan.chunk_steps * kStepElems * 2));
    float* c_all = plan.chunks > 1
                       ? static_cast<float*>(c_buf.get((p1 - p0) * subs * 1024 * sizeof(float)))
                       : nullptr;
    for (int64_t ch = 0; ch < plan.chunks; ++ch) {
      const int64_t s0 = ch * plan.chunk_steps;
      const int64_t steps = std::min(plan.chunk_steps, w.k_steps() - s0);
      pack_a(x, x_stride, w.k(), r0, rows, subs, s0, steps, a);
      const bool last = ch + 1 == plan.chunks;
      for (int64_t p = p0; p < p1; ++p) {
        const uint16_t* b;
        if (b_wide != nullptr) {
          widen_codes(w.code_panel(p) + s0 * kStepElems, steps * kStepElems, w.fp8_table(), b_wide);
          b = b_wide;
        } else {
          b = w.panel(p) + s0 * kStepElems;
        }
        for (int64_t sub = 0; sub < subs; ++sub) {
          float* c = c_all != nullptr ? c_all + ((p - p0) * subs + sub) * 1024 : scratch;
          tile_block(a + sub * steps * kStepElems, b, steps, c, ch > 0, pending, ea);
          if (last) {
            pending.c = c;
            pending.next = 0;
            pending.rows = std::min<int64_t>(32, rows - sub * 32);
            pending.cols = std::min<int64_t>(32, w.n() - p * 32);
            pending.r0 = r0 + sub * 32;
            pending.n0 = p * 32;
          }
        }
      }
    }
  }
  if (pending.c != nullptr) epilogue_rows(pending, pending.rows, ea);
  _tile_release();
  VIDAX_AMX_BARRIER();
}

template <typename X>
void run(const X* x, int64_t m, int64_t x_stride, const AmxPackedWeight& w, GemmEpilogue epilogue,
         const Output& out) {
  VIDAX_CHECK(amx_bf16_usable(), "amx_gemm_bf16 called on a machine without usable AMX-BF16");
  VIDAX_CHECK(w.defined(), "amx_gemm_bf16 with an empty weight");
  VIDAX_CHECK(x_stride >= w.k(), "amx_gemm_bf16: row stride ", x_stride, " < K ", w.k());
  if (m <= 0) return;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  Plan plan;
  plan.m = m;
  plan.subs = ceil_div(m, 32);
  plan.m_blocks = ceil_div(plan.subs, kMaxBlockSubs);
  if (plan.m_blocks >= threads) {
    plan.m_blocks = ceil_div(plan.m_blocks, threads) * threads;
  }
  plan.m_blocks = std::min(plan.m_blocks, plan.subs);
  plan.n_groups = plan.m_blocks >= threads
                      ? 1
                      : std::min<int64_t>(w.panels(), ceil_div(threads, plan.m_blocks));
  // K chunks: the packed A block (up to 256 rows) stays under kMaxChunkBytes.
  const int64_t max_steps = std::max<int64_t>(8, kMaxChunkBytes / (kMaxBlockSubs * 32 * 64));
  plan.chunks = ceil_div(w.k_steps(), max_steps);
  plan.chunk_steps = ceil_div(w.k_steps(), plan.chunks);
  if (threads == 1) {
    run_thread(plan, x, x_stride, w, epilogue, out, 0, 1);
    return;
  }
#pragma omp parallel num_threads(threads)
  run_thread(plan, x, x_stride, w, epilogue, out, omp_get_thread_num(), omp_get_num_threads());
}

// c (32x32 f32, row stride 32) += the selected steps' products: a holds the selected steps'
// A tiles one after another, `step_of[i]` is the K step of the i-th.
VIDAX_AMX void tile_block_selected(const uint16_t* a, const uint16_t* panel, const int32_t* step_of,
                                   int64_t count, float* c) {
  VIDAX_AMX_BARRIER();
  _tile_loadd(0, c, 128);
  _tile_loadd(1, c + 16, 128);
  _tile_loadd(2, c + 16 * 32, 128);
  _tile_loadd(3, c + 16 * 32 + 16, 128);
  for (int64_t i = 0; i < count; ++i) {
    const uint16_t* b = panel + static_cast<int64_t>(step_of[i]) * kStepElems;
    tile_step(a, b);
    a += kStepElems;
  }
  _tile_stored(0, c, 128);
  _tile_stored(1, c + 16, 128);
  _tile_stored(2, c + 16 * 32, 128);
  _tile_stored(3, c + 16 * 32 + 16, 128);
  VIDAX_AMX_BARRIER();
}

// Row blocks [b0, b1) of 32 rows, up to kMaxBlockSubs at a time: each block's selected steps
// are packed once, then every weight panel runs against the blocks of the group while it is in
// L2 (as the dense kernel shares a panel across an M block).
VIDAX_AMX void accumulate_blocks(const BFloat16* x, int64_t m, int64_t x_stride,
                                 const AmxPackedWeight& w, const uint8_t* step_mask, float* y,
                                 int64_t b0, int64_t b1) {
  static thread_local ThreadScratch<ThreadBuffer> a_scratch;
  auto* a =
      static_cast<uint16_t*>(a_scratch.value.get(kMaxBlockSubs * w.k_steps() * kStepElems * 2));
  std::vector<int32_t> steps[kMaxBlockSubs];
  int64_t offset[kMaxBlockSubs];
  alignas(64) float c[32 * 32];
  const TileConfig config;
  VIDAX_AMX_BARRIER();
  _tile_loadconfig(&config);
  const int64_t n = w.n();
  for (int64_t g0 = b0; g0 < b1; g0 += kMaxBlockSubs) {
    const int64_t g1 = std::min(b1, g0 + kMaxBlockSubs);
    int64_t packed = 0;
    for (int64_t blk = g0; blk < g1; ++blk) {
      std::vector<int32_t>& st = steps[blk - g0];
      st.clear();
      for (int64_t s = 0; s < w.k_steps(); ++s)
        if (step_mask == nullptr || step_mask[blk * w.k_steps() + s] != 0)
          st.push_back(static_cast<int32_t>(s));
      offset[blk - g0] = packed;
      const int64_t r0 = blk * 32, rows = std::min<int64_t>(32, m - r0);
      for (const int32_t s : st) {
        pack_a(x, x_stride, w.k(), r0, rows, 1, s, 1, a + packed * kStepElems);
        ++packed;
      }
    }
    if (packed == 0) continue;
    for (int64_t p = 0; p < w.panels(); ++p) {
      const int64_t n0 = p * 32, cols = std::min<int64_t>(32, n - n0);
      for (int64_t blk = g0; blk < g1; ++blk) {
        const std::vector<int32_t>& st = steps[blk - g0];
        if (st.empty()) continue;
        const int64_t r0 = blk * 32, rows = std::min<int64_t>(32, m - r0);
        for (int64_t r = 0; r < 32; ++r) {
          float* cr = c + r * 32;
          if (r < rows) {
            std::memcpy(cr, y + (r0 + r) * n + n0, sizeof(float) * static_cast<size_t>(cols));
            std::memset(cr + cols, 0, sizeof(float) * static_cast<size_t>(32 - cols));
          } else {
            std::memset(cr, 0, sizeof(float) * 32);
          }
        }
        tile_block_selected(a + offset[blk - g0] * kStepElems, w.panel(p), st.data(),
                            static_cast<int64_t>(st.size()), c);
        for (int64_t r = 0; r < rows; ++r)
          std::memcpy(y + (r0 + r) * n + n0, c + r * 32, sizeof(float) * static_cast<size_t>(cols));
      }
    }
  }
  _tile_release();
  VIDAX_AMX_BARRIER();
}

}  // namespace

AmxPackedWeight::AmxPackedWeight(const Tensor& weight, const Tensor& bias) {
  VIDAX_CHECK(weight.rank() == 2, "AMX weight must be [N, K], got ", weight.describe());
  const Tensor w = weight.dtype() == DType::kBF16 ? weight.contiguous() : weight.to(DType::kBF16);
  Tensor b;
  if (bias.defined()) {
    VIDAX_CHECK(bias.numel() == weight.dim(0), "bias ", bias.describe(), " for weight ",
                weight.describe());
    b = bias.dtype() == DType::kF32 ? bias.contiguous() : bias.to(DType::kF32);
  }
  pack(w.data<BFloat16>(), w.dim(0), w.dim(1), b.defined() ? b.data<float>() : nullptr);
}

AmxPackedWeight::AmxPackedWeight(const BFloat16* weight, int64_t n, int64_t k, const float* bias) {
  pack(weight, n, k, bias);
}

size_t AmxPackedWeight::packed_bytes() const { return packed_ ? packed_->bytes() : 0; }

size_t AmxPackedWeight::packed_elements(int64_t n, int64_t k) {
  return static_cast<size_t>(ceil_div(n, 32) * ceil_div(k, 32) * kStepElems);
}

void AmxPackedWeight::set_shape(int64_t n, int64_t k) {
  VIDAX_CHECK(n > 0 && k > 0, "AMX weight must be non-empty, got [", n, ", ", k, "]");
  n_ = n;
  k_ = k;
  k_steps_ = ceil_div(k, 32);
  panels_ = ceil_div(n, 32);
}

namespace {

// Tile (p, s, j): row q, column c = (W[p*32 + j*16 + c][s*32 + 2q], ...[s*32 + 2q + 1]); the
// padding (rows >= n, columns >= k) stays as the storage was (zero-initialised).
template <typename T>
void pack_panels(const T* src, int64_t n, int64_t k, int64_t k_steps, T* dst) {
  const int64_t panels = ceil_div(n, 32);
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < panels; ++p) {
    for (int64_t j = 0; j < 2; ++j) {
      for (int64_t c = 0; c < 16; ++c) {
        const int64_t row = p * 32 + j * 16 + c;
        if (row >= n) continue;
        for (int64_t kk = 0; kk < k; ++kk) {
          const int64_t s = kk / 32, q = (kk % 32) / 2, e = kk % 2;
          dst[((p * k_steps + s) * 2 + j) * kTileElems + q * 32 + c * 2 + e] = src[row * k + kk];
        }
      }
    }
  }
}

// pack_panels for bf16 with AVX-512: each tile is a 16 x 16 transpose of dword pairs (16 weight
// rows of 32 K values become 16 tile rows of 16 pairs), four shuffle stages in registers; rows
// past n and K past k are zero. The same bytes as the scalar loop, several times faster: every
// load, and every block a weights budget or --weights sharded brings in, packs.
__attribute__((target("avx512f,avx512bw"))) void pack_panels_avx512(const uint16_t* src, int64_t n,
                                                                    int64_t k, int64_t k_steps,
                                                                    uint16_t* dst) {
  const int64_t panels = ceil_div(n, 32);
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < panels; ++p) {
    for (int64_t s = 0; s < k_steps; ++s) {
      const int64_t valid = std::min<int64_t>(32, k - s * 32);
      const auto mask = static_cast<__mmask32>(valid >= 32 ? ~0u : (1u << valid) - 1);
      for (int64_t j = 0; j < 2; ++j) {
        __m512i r[16], t[16], u[16];
        for (int64_t c = 0; c < 16; ++c) {
          const int64_t row = p * 32 + j * 16 + c;
          r[c] = row < n ? _mm512_maskz_loadu_epi16(mask, src + row * k + s * 32)
                         : _mm512_setzero_si512();
        }
        for (int i = 0; i < 8; ++i) {
          t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
          t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
        }
        // u[4i + m], 128-bit lane L: dword 4L + m of rows 4i .. 4i + 3.
        for (int i = 0; i < 4; ++i) {
          u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
          u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
          u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
          u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
        }
        uint16_t* tile = dst + ((p * k_steps + s) * 2 + j) * kTileElems;
        for (int m = 0; m < 4; ++m) {  // tile row 4L + m, lane i: u[4i + m]'s lane L
          const __m512i v0 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0x44);
          const __m512i v1 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0xEE);
          const __m512i v2 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0x44);
          const __m512i v3 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0xEE);
          _mm512_store_si512(tile + (0 + m) * 32, _mm512_shuffle_i32x4(v0, v2, 0x88));
          _mm512_store_si512(tile + (4 + m) * 32, _mm512_shuffle_i32x4(v0, v2, 0xDD));
          _mm512_store_si512(tile + (8 + m) * 32, _mm512_shuffle_i32x4(v1, v3, 0x88));
          _mm512_store_si512(tile + (12 + m) * 32, _mm512_shuffle_i32x4(v1, v3, 0xDD));
        }
      }
    }
  }
}

// The bf16 value of each fp8 magnitude 0..127 as two byte tables (low bytes, then high bytes;
// the sign bit is the code's own), built once; convert_floats is exact here.
const uint8_t* fp8_bf16_table(DType dtype) {
  VIDAX_CHECK(dtype == DType::kF8E4M3 || dtype == DType::kF8E5M2, "fp8 table for ",
              dtype_name(dtype));
  static const auto tables = [] {
    std::array<std::array<uint8_t, 256>, 2> t{};
    std::array<uint8_t, 128> codes{};
    for (int i = 0; i < 128; ++i) codes[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
    for (int d = 0; d < 2; ++d) {
      std::array<uint16_t, 128> bits{};
      convert_floats(codes.data(), d == 0 ? DType::kF8E4M3 : DType::kF8E5M2, bits.data(),
                     DType::kBF16, 128);
      for (size_t m = 0; m < 128; ++m) {
        t[static_cast<size_t>(d)][m] = static_cast<uint8_t>(bits[m] & 0xff);
        t[static_cast<size_t>(d)][128 + m] = static_cast<uint8_t>(bits[m] >> 8);
      }
    }
    return t;
  }();
  return tables[dtype == DType::kF8E4M3 ? 0 : 1].data();
}

// Where the q-th code of a 64-code group is stored so that widen_codes' in-lane byte interleave
// writes the group's words in order: words 0..31 come from the low 8 bytes of each 128-bit lane,
// words 32..63 from the high 8.
int64_t fp8_group_position(int64_t q) { return (q % 32) / 8 * 16 + (q / 32) * 8 + q % 8; }

}  // namespace

AmxPackedWeight AmxPackedWeight::fp8(const uint8_t* codes, DType fp8_dtype, int64_t n, int64_t k,
                                     std::vector<float> column_scale, const float* bias) {
  VIDAX_CHECK(static_cast<int64_t>(column_scale.size()) == n,
              "AMX fp8 weight: ", column_scale.size(), " column scales for ", n, " outputs");
  AmxPackedWeight w;
  w.set_shape(n, k);
  w.fp8_table_ = fp8_bf16_table(fp8_dtype);
  const size_t elements = packed_elements(n, k);  // a multiple of 64
  std::vector<uint8_t> natural(elements, 0);
  pack_panels(codes, n, k, w.k_steps_, natural.data());
  w.packed_ = allocate_storage(elements);
  auto* stored = reinterpret_cast<uint8_t*>(w.packed_->data());
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < static_cast<int64_t>(elements / 64); ++g)
    for (int64_t q = 0; q < 64; ++q) stored[g * 64 + fp8_group_position(q)] = natural[g * 64 + q];
  w.scale_ = std::move(column_scale);
  if (bias != nullptr) {
    w.bias_ = allocate_storage(static_cast<size_t>(n) * sizeof(float));
    std::memcpy(w.bias_->data(), bias, static_cast<size_t>(n) * sizeof(float));
  }
  return w;
}

void AmxPackedWeight::pack(const BFloat16* weight, int64_t n, int64_t k, const float* bias) {
  set_shape(n, k);
  packed_ = allocate_storage(static_cast<size_t>(panels_ * k_steps_ * kStepElems) * 2);
  const auto* src = reinterpret_cast<const uint16_t*>(weight);
  auto* dst = reinterpret_cast<uint16_t*>(packed_->data());
  if (amx_bf16_usable()) {  // (AVX-512 BW with it) the vector transpose
    pack_panels_avx512(src, n, k, k_steps_, dst);
  } else {  // the emulations and references that read this layout on other machines
    pack_panels(src, n, k, k_steps_, dst);
  }
  if (bias != nullptr) {
    bias_ = allocate_storage(static_cast<size_t>(n) * sizeof(float));
    std::memcpy(bias_->data(), bias, static_cast<size_t>(n) * sizeof(float));
  }
}

void amx_gemm_bf16(const BFloat16* x, int64_t m, int64_t x_stride, const AmxPackedWeight& w,
                   float* y, GemmEpilogue epilogue) {
  Output out;
  out.f32 = y;
  out.n = w.n();
  run(x, m, x_stride, w, epilogue, out);
}

void amx_gemm_bf16(const BFloat16* x, int64_t m, int64_t x_stride, const AmxPackedWeight& w,
                   BFloat16* y, GemmEpilogue epilogue) {
  Output out;
  out.bf16 = y;
  out.n = w.n();
  run(x, m, x_stride, w, epilogue, out);
}

void amx_gemm_bf16(const float* x, int64_t m, int64_t x_stride, const AmxPackedWeight& w, float* y,
                   GemmEpilogue epilogue) {
  Output out;
  out.f32 = y;
  out.n = w.n();
  run(x, m, x_stride, w, epilogue, out);
}

void amx_gemm_bf16_accumulate(const BFloat16* x, int64_t m, int64_t x_stride,
                              const AmxPackedWeight& w, const uint8_t* step_mask, float* y) {
  VIDAX_CHECK(amx_bf16_usable(), "amx_gemm_bf16_accumulate on a machine without usable AMX-BF16");
  VIDAX_CHECK(w.defined() && x_stride >= w.k(), "amx_gemm_bf16_accumulate: bad weight or stride");
  VIDAX_CHECK(!w.is_fp8(), "amx_gemm_bf16_accumulate takes bf16 weights, not fp8");
  if (m <= 0) return;
  const int64_t blocks = ceil_div(m, 32);
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads == 1 || blocks == 1) {
    accumulate_blocks(x, m, x_stride, w, step_mask, y, 0, blocks);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    accumulate_blocks(x, m, x_stride, w, step_mask, y, blocks * t / nt, blocks * (t + 1) / nt);
  }
}

void gemm_accumulate_steps_reference(const BFloat16* x, int64_t m, int64_t x_stride,
                                     const AmxPackedWeight& w, const uint8_t* step_mask, float* y) {
  const int64_t n = w.n(), k = w.k(), steps = w.k_steps();
  for (int64_t r = 0; r < m; ++r)
    for (int64_t col = 0; col < n; ++col) {
      const int64_t p = col / 32, j = (col % 32) / 16, cc = col % 16;
      double sum = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        const int64_t s = kk / 32, q = (kk % 32) / 2, e = kk % 2;
        if (step_mask != nullptr && step_mask[(r / 32) * steps + s] == 0) continue;
        const uint16_t wv = w.panel(p)[(s * 2 + j) * kTileElems + q * 32 + cc * 2 + e];
        sum += static_cast<double>(bf16_to_f32(wv)) *
               static_cast<double>(bf16_to_f32(x[r * x_stride + kk].bits));
      }
      y[r * n + col] += static_cast<float>(sum);
    }
}

}  // namespace vidax
