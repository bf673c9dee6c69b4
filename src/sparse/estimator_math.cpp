#include "sparse/estimator_math.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <span>

#include "core/convert.h"
#include "core/error.h"
#include "core/tensor.h"
#include "kernels/cpu/amx_gemm.h"
#include "kernels/cpu/attention_mass.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"

namespace vidax::sparse {

void gemm_abt(const float* a, int64_t m, const float* b, int64_t n, int64_t k, float* c) {
  // b is the (small, reused) "weight" side of PackedLinear: y[m, n] = x[m, k] . W[n, k]^T.
  const Tensor w =
      Tensor::from_floats(std::span<const float>(b, static_cast<size_t>(n * k)), Shape{n, k});
  const PackedLinear lin(w, Tensor(), DType::kF32);
  lin.forward(a, m, c);
}

namespace {

// In place on scores [n, r] (key-major): probs = softmax down each column of scale * scores.
// Maxima and sums accumulate across rows of r contiguous values.
void softmax_columns(float* p, int64_t n, int64_t r, float scale) {
  std::vector<float> mx(static_cast<size_t>(r), -std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < r; ++i)
      mx[static_cast<size_t>(i)] = std::max(mx[static_cast<size_t>(i)], p[j * r + i]);
  // max(scale * s) = scale * max(s) only for a positive scale, which 1/sqrt(d) is.
  for (auto& m : mx) m *= scale;
  constexpr int64_t kChunk = 512;  // keys per parallel chunk
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> part(static_cast<size_t>(chunks * r), 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t j0 = ch * kChunk, j1 = std::min(n, j0 + kChunk);
    for (int64_t j = j0; j < j1; ++j)
      for (int64_t i = 0; i < r; ++i)
        p[j * r + i] = p[j * r + i] * scale - mx[static_cast<size_t>(i)];
    exp_f32(p + j0 * r, p + j0 * r, (j1 - j0) * r);
    double* s = &part[static_cast<size_t>(ch * r)];
    for (int64_t j = j0; j < j1; ++j)
      for (int64_t i = 0; i < r; ++i) s[i] += p[j * r + i];
  }
  std::vector<float> inv(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i) {
    double sum = 0;
    for (int64_t ch = 0; ch < chunks; ++ch) sum += part[static_cast<size_t>(ch * r + i)];
    inv[static_cast<size_t>(i)] = static_cast<float>(1.0 / sum);
  }
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < r; ++i) p[j * r + i] *= inv[static_cast<size_t>(i)];
}

}  // namespace

void sampled_attention_rows(const AttentionCall& call, int64_t head,
                            const std::vector<int64_t>& rows, std::vector<float>& probs) {
  const int64_t n = call.grid.tokens(), d = call.head_dim;
  const auto r = static_cast<int64_t>(rows.size());
  const auto ud = static_cast<size_t>(d);
  // [rows, head_dim] sampled queries (pre-scaled) and [tokens, head_dim] keys of this head.
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> q(static_cast<size_t>(r) * ud);
  for (int64_t i = 0; i < r; ++i)
    for (int64_t c = 0; c < d; ++c)
      q[static_cast<size_t>(i) * ud + static_cast<size_t>(c)] =
          call.q[rows[static_cast<size_t>(i)] * call.stride + head * d + c] * scale;
  std::unique_ptr<float[]> k(new float[static_cast<size_t>(n) * ud]);
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < n; ++j)
    std::copy_n(call.k + j * call.stride + head * d, d, &k[static_cast<size_t>(j) * ud]);
  // scores [tokens, rows] = K . Q^T, Q the small packed side.
  probs.resize(static_cast<size_t>(n * r));
  gemm_abt(k.get(), n, q.data(), r, d, probs.data());
  softmax_columns(probs.data(), n, r, 1.0f);  // q was pre-scaled
}

namespace {

constexpr int64_t kMassChunk = 512;  // keys per chunk: scores [512, rows] stay in L2

}  // namespace

void sampled_attention_mass_bf16(const AttentionCall& call, const std::vector<int64_t>& rows,
                                 const std::vector<const uint64_t*>& keep,
                                 std::vector<double>& mass, bool allow_fast) {
  const int64_t n = call.grid.tokens(), d = call.head_dim, heads = call.heads;
  const auto r = static_cast<int64_t>(rows.size());
  const auto sets = static_cast<int64_t>(keep.size());
  VIDAX_CHECK(r > 0 && sets > 0 && sets <= 8, "sampled_attention_mass_bf16: ", r, " rows, ", sets,
              " key sets (1..8)");
  const int64_t words = (r + 63) / 64;
  const auto ud = static_cast<size_t>(d);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t chunks = (n + kMassChunk - 1) / kMassChunk;
  const bool amx = allow_fast && amx_bf16_usable();
  const bool dot = allow_fast && !amx && bf16_dot_product_fast();
  const int64_t dpairs = (d + 1) / 2, rpad = (r + 15) / 16 * 16;
  // Per head: the sampled queries rounded unscaled (as the DiT rounds q before the kernel scales
  // scores), packed as the AMX "weight" or as bf16 pairs for vdpbf16ps (dot); otherwise the
  // whole score matrix of the head from one f32 GEMM on the rounded values (products of bf16
  // values are exact in f32).
  std::vector<AmxPackedWeight> w(static_cast<size_t>(heads));
  std::vector<std::vector<float>> scores(amx || dot ? 0 : static_cast<size_t>(heads));
  // dot: per head the rounded queries as bf16 pairs [dpairs][rpad] (zero-padded).
  std::vector<std::vector<uint32_t>> qpairs(dot ? static_cast<size_t>(heads) : 0);
  // The call's bf16 copies, when given, hold exactly these rounded values.
  const bool given16 = call.q16 != nullptr && call.k16 != nullptr;
  std::unique_ptr<float[]> k;  // without AMX: one head's keys rounded, as f32 [n, d]
  for (int64_t h = 0; h < heads; ++h) {
    std::vector<BFloat16> q16(static_cast<size_t>(r) * ud);
    for (int64_t i = 0; i < r; ++i) {
      const int64_t at = rows[static_cast<size_t>(i)] * call.stride + h * d;
      if (given16)
        std::copy_n(call.q16 + at, d, &q16[static_cast<size_t>(i) * ud]);
      else
        convert_floats_serial(call.q + at, DType::kF32, &q16[static_cast<size_t>(i) * ud],
                              DType::kBF16, ud);
    }
    if (amx) {
      w[static_cast<size_t>(h)] = AmxPackedWeight(q16.data(), r, d, nullptr);
      continue;
    }
    if (dot) {
      auto& qp = qpairs[static_cast<size_t>(h)];
      qp.assign(static_cast<size_t>(dpairs * rpad), 0u);
      for (int64_t i = 0; i < r; ++i)
        for (int64_t c = 0; c < d; ++c)
          qp[static_cast<size_t>((c / 2) * rpad + i)] |=
              static_cast<uint32_t>(q16[static_cast<size_t>(i * d + c)].bits) << (16 * (c % 2));
      continue;
    }
    std::vector<float> qf(q16.size());
    convert_floats_serial(q16.data(), DType::kBF16, qf.data(), DType::kF32, qf.size());
    if (!k) k.reset(new float[static_cast<size_t>(n) * ud]);  // reused by every head
#pragma omp parallel
    {
      std::vector<BFloat16> row16(given16 ? 0 : ud);
#pragma omp for schedule(static)
      for (int64_t j = 0; j < n; ++j) {
        float* kr = &k[static_cast<size_t>(j) * ud];
        const int64_t at = j * call.stride + h * d;
        const BFloat16* src = call.k16 + at;
        if (!given16) {  // round through bf16, as the kernel sees the key
          convert_floats_serial(call.k + at, DType::kF32, row16.data(), DType::kBF16, ud);
          src = row16.data();
        }
        convert_floats_serial(src, DType::kBF16, kr, DType::kF32, ud);
      }
    }
    auto& sc = scores[static_cast<size_t>(h)];
    sc.resize(static_cast<size_t>(n * r));
    gemm_abt(k.get(), n, qf.data(), r, d, sc.data());
  }
  // [heads][chunks][r] maxima and sums, [heads][chunks][sets][r] kept sums.
  std::vector<float> cmax(static_cast<size_t>(heads * chunks * r));
  std::vector<float> csum(cmax.size()), ckept(cmax.size() * static_cast<size_t>(sets));
  // One region over (chunk, head), heads innermost: the keys of all heads of a chunk are read
  // together (contiguous rows of the call) while the chunk's scores stay in cache.
#pragma omp parallel
  {
    std::vector<float> buf(amx || dot ? static_cast<size_t>(kMassChunk * r) : 0);
    // dot: the chunk's keys rounded to bf16, as pairs [round_up(m, kPairScoreKeys)][dpairs].
    std::vector<BFloat16> keys16(dot ? static_cast<size_t>(kMassChunk * dpairs * 2) : 0);
    std::vector<BFloat16> row16(dot && !given16 ? ud : 0);
    std::vector<const uint64_t*> bits(static_cast<size_t>(sets));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < chunks * heads; ++t) {
      const int64_t ch = t / heads, h = t % heads;
      const int64_t j0 = ch * kMassChunk, j1 = std::min(n, j0 + kMassChunk);
      float* pc =
          amx || dot ? buf.data() : &scores[static_cast<size_t>(h)][static_cast<size_t>(j0 * r)];
      for (int64_t s = 0; s < sets; ++s)
        bits[static_cast<size_t>(s)] = keep[static_cast<size_t>(s)] + j0 * words;
      const auto at = static_cast<size_t>((h * chunks + ch) * r);
      const ChunkMassOut out{&cmax[at], &csum[at], &ckept[at * static_cast<size_t>(sets)]};
      if (amx) {
        // scores [chunk, rows] = K16 . Q16^T: the keys read in place from the strided call (the
        // bf16 copy, or f32 rounded while packed into tiles).
        if (given16)
          amx_gemm_bf16(call.k16 + j0 * call.stride + h * d, j1 - j0, call.stride,
                        w[static_cast<size_t>(h)], pc);
        else
          amx_gemm_bf16(call.k + j0 * call.stride + h * d, j1 - j0, call.stride,
                        w[static_cast<size_t>(h)], pc);
      } else if (dot) {
        const int64_t m = j1 - j0;
        const int64_t mpad = (m + kPairScoreKeys - 1) / kPairScoreKeys * kPairScoreKeys;
        for (int64_t j = 0; j < m; ++j) {
          BFloat16* dst = &keys16[static_cast<size_t>(j * dpairs * 2)];
          const int64_t at = (j0 + j) * call.stride + h * d;
          if (given16) {
            std::copy_n(call.k16 + at, d, dst);
          } else {  // rounded as the kernel sees the key
            convert_floats_serial(call.k + at, DType::kF32, row16.data(), DType::kBF16, ud);
            std::copy_n(row16.data(), d, dst);
          }
          if (d % 2 != 0) dst[d] = BFloat16{};  // the odd channel's pair partner
        }
        std::fill(keys16.begin() + m * dpairs * 2, keys16.begin() + mpad * dpairs * 2,
                  BFloat16{});  // the last register tile's rows past m
        bf16_pair_scores(reinterpret_cast<const uint32_t*>(keys16.data()), m, dpairs,
                         qpairs[static_cast<size_t>(h)].data(), r, pc);
      }
      // AMX and the bf16 dot products imply AVX-512F; allow_fast = false forces plain loops.
      if (allow_fast)
        chunk_attention_mass(pc, j1 - j0, r, scale, bits.data(), sets, words, out);
      else
        chunk_attention_mass_reference(pc, j1 - j0, r, scale, bits.data(), sets, words, out);
    }
  }
  // Chunks combined in double against each row's maximum.
  mass.assign(static_cast<size_t>(heads * sets * r), 0.0);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < r; ++i) {
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t ch = 0; ch < chunks; ++ch)
        m = std::max(m, cmax[static_cast<size_t>((h * chunks + ch) * r + i)]);
      double total = 0;
      std::vector<double> kept(static_cast<size_t>(sets), 0.0);
      for (int64_t ch = 0; ch < chunks; ++ch) {
        const auto at = static_cast<size_t>((h * chunks + ch) * r);
        const double f = std::exp(static_cast<double>(cmax[at + static_cast<size_t>(i)]) - m);
        total += f * csum[at + static_cast<size_t>(i)];
        for (int64_t s = 0; s < sets; ++s)
          kept[static_cast<size_t>(s)] +=
              f * ckept[at * static_cast<size_t>(sets) + static_cast<size_t>(s * r + i)];
      }
      for (int64_t s = 0; s < sets; ++s)
        mass[static_cast<size_t>((h * sets + s) * r + i)] = kept[static_cast<size_t>(s)] / total;
    }
}

}  // namespace vidax::sparse
