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
#include "kernels/cpu/amx_tiles-inl.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/elementwise.h"

namespace vidax {
namespace {

using namespace amx_detail;  // NOLINT(google-build-using-namespace): this file is the kernel

constexpr int64_t kPrefetchRows = 8;  // f32 A rows prefetched ahead while packing

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
          tile_block(a + sub * steps * kStepElems, b, nullptr, steps, ch > 0 ? c : nullptr, c,
                     pending, ea);
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

}  // namespace vidax
