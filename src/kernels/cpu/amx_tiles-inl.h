// Internals shared by the AMX-BF16 GEMM kernels (amx_gemm.cpp, amx_reuse_gemm.cpp): the tile
// configuration, per-thread buffers, bf16 rounding and K-step loads, the fused epilogue of a
// finished 32x32 block and one tile K step. Include only from those .cpp files; everything is
// inline, in vidax::amx_detail. The layouts are described in amx_gemm.h.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <utility>

#include "core/error.h"
#include "core/tensor.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"

// GCC 12 warns inside its own AVX-512 intrinsic headers (their _mm512_undefined_* helpers); this
// header is included only by the AMX kernels' .cpp files, for which this holds throughout.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// Functions using AMX or AVX-512 intrinsics; only reached after amx_bf16_usable().
#define VIDAX_AMX \
  __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16,avx512vbmi")))
// GCC 12's tile load/store builtins do not tell the compiler that they read or write memory; a
// barrier between them and ordinary accesses to the same buffers keeps the order.
#define VIDAX_AMX_BARRIER() asm volatile("" ::: "memory")

namespace vidax::amx_detail {

constexpr int64_t kTileElems = 16 * 32;         // bf16 per A or B tile (16 rows x 64 bytes)
constexpr int64_t kStepElems = 2 * kTileElems;  // two tiles per 32-deep K step
constexpr int64_t kMaxBlockSubs = 8;            // M block: up to 8 x 32 = 256 rows
constexpr int64_t kMaxChunkBytes = 1 << 20;     // packed A block per thread (L2 resident)

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

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

// 16 lanes of gelu(approximate='tanh') = x sigmoid(2u), u = c (x + a x^3) with PyTorch's f32
// constants, evaluated in double (8 lanes at a time) and rounded to f32 once: the exponential's
// argument carries no f32 rounding (which exp would amplify by 2|u|), so the result is within
// ~0.5 ulp of the exact function. exp(-2u) = 2^n e^r (|r| <= ln2/2, Taylor degree 9, 2e-11
// relative); 1 / (1 + t) by rcp14 and two Newton steps. NaN propagates.
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

// gelu(approximate='tanh') in f32 throughout: x / (1 + exp(-2u)) with exp(z) = 2^n e^r (two-part
// ln 2, Taylor degree 6) and one Newton step on rcp14. For x >= 0 within a few ulp of
// gelu_tanh_ps; for x < 0 the f32 rounding of u is amplified by the exponential (about 2|2u| ulp
// relative: ~10 ulp at x = -2, hundreds near x = -9, where the value is below 1e-20), so the
// absolute error stays below ~1e-7 |x|. Cheaper (with
// everything reused it took an ffn_in call at 1950 tokens from 23.6 to 17.4 ms). For the reuse
// kernel only, whose outputs carry the reuse error anyway; the dense GEMM keeps gelu_tanh_ps.
VIDAX_AMX inline __m512 gelu_tanh_f32_ps(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.f);
  __m512 z = _mm512_mul_ps(_mm512_mul_ps(x, _mm512_set1_ps(-2.f * 0.797884561f)),
                           _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), _mm512_mul_ps(x, x), one));
  z = _mm512_min_ps(_mm512_set1_ps(88.f), _mm512_max_ps(_mm512_set1_ps(-88.f), z));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(z, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), z);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-6f), r);
  __m512 p = _mm512_set1_ps(1.f / 720.f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 120.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 24.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 6.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, one);
  p = _mm512_fmadd_ps(p, r, one);
  const __m512 d = _mm512_add_ps(one, _mm512_scalef_ps(p, n));  // 1 + exp(-2u)
  __m512 q = _mm512_rcp14_ps(d);
  q = _mm512_mul_ps(q, _mm512_fnmadd_ps(d, q, _mm512_set1_ps(2.f)));
  return _mm512_mul_ps(x, q);
}

struct Output {
  float* f32 = nullptr;
  BFloat16* bf16 = nullptr;
  int64_t n = 0;  // row stride
};

// A finished 32x32 block whose epilogue (bias, GELU, conversion, stores) is still to be done,
// row by row, while the tile unit computes the next block.
struct PendingBlock {
  const float* c = nullptr;  // 32x32 f32, row stride 32 (only read); null: nothing pending
  int64_t next = 0, rows = 0, cols = 0, r0 = 0, n0 = 0;
  float* keep = nullptr;  // the reuse kernel: where the block's values before the activation go
                          // (32x32, row stride 32); null: not stored
};

struct EpilogueArgs {
  const float* scale = nullptr;  // fp8 weights: acc * scale + bias
  const float* bias = nullptr;
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  Output out;
  bool fast_gelu = false;  // the reuse kernel: gelu_tanh_f32_ps instead of gelu_tanh_ps
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
    const float* row = pb.c + r * 32;
    __m512 v0, v1;
    if (ea.scale != nullptr) {
      v0 = _mm512_fmadd_ps(_mm512_loadu_ps(row), s0, b0);
      v1 = _mm512_fmadd_ps(_mm512_loadu_ps(row + 16), s1, b1);
    } else {
      v0 = _mm512_add_ps(_mm512_loadu_ps(row), b0);
      v1 = _mm512_add_ps(_mm512_loadu_ps(row + 16), b1);
    }
    const int64_t at = (pb.r0 + r) * ea.out.n + pb.n0;
    if (pb.keep != nullptr) {
      _mm512_storeu_ps(pb.keep + r * 32, v0);
      _mm512_storeu_ps(pb.keep + r * 32 + 16, v1);
    }
    if (ea.epilogue == GemmEpilogue::kGeluTanh) {
      v0 = ea.fast_gelu ? gelu_tanh_f32_ps(v0) : gelu_tanh_ps(v0);
      v1 = ea.fast_gelu ? gelu_tanh_f32_ps(v1) : gelu_tanh_ps(v1);
    } else if (ea.epilogue == GemmEpilogue::kGeluErf) {
      alignas(64) float act[32];  // not in place: pb.c may be the reuse kernel's kept product
      _mm512_store_ps(act, v0);
      _mm512_store_ps(act + 16, v1);
      gelu_erf(act, act, 32);
      v0 = _mm512_load_ps(act);
      v1 = _mm512_load_ps(act + 16);
    }
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

// c_out (32x32 f32, row stride 32) = c_in (the same layout; null: zero) + `count` K steps' tile
// products: a holds their A tiles one after another; step_of (null: 0, 1, 2, ...) gives each
// one's K step within b. Meanwhile the previous block's epilogue (pb) runs a few rows per K step
// on the vector units, overlapping the tile products; pb is complete (and cleared) before c_out
// is stored, so pb.c may be c_out itself.
VIDAX_AMX inline void tile_block(const uint16_t* a, const uint16_t* b, const int32_t* step_of,
                                 int64_t count, const float* c_in, float* c_out, PendingBlock& pb,
                                 const EpilogueArgs& ea) {
  VIDAX_AMX_BARRIER();
  if (c_in != nullptr) {
    _tile_loadd(0, c_in, 128);
    _tile_loadd(1, c_in + 16, 128);
    _tile_loadd(2, c_in + 16 * 32, 128);
    _tile_loadd(3, c_in + 16 * 32 + 16, 128);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  const int64_t per_step = pb.c != nullptr && count > 0 ? ceil_div(pb.rows - pb.next, count) : 0;
  for (int64_t i = 0; i < count; ++i) {
    tile_step(a + i * kStepElems, b + (step_of != nullptr ? step_of[i] : i) * kStepElems);
    if (per_step > 0) epilogue_rows(pb, per_step, ea);
  }
  if (pb.c != nullptr) {
    epilogue_rows(pb, pb.rows, ea);
    pb.c = nullptr;
  }
  VIDAX_AMX_BARRIER();
  _tile_stored(0, c_out, 128);
  _tile_stored(1, c_out + 16, 128);
  _tile_stored(2, c_out + 16 * 32, 128);
  _tile_stored(3, c_out + 16 * 32 + 16, 128);
  VIDAX_AMX_BARRIER();
}

}  // namespace vidax::amx_detail
