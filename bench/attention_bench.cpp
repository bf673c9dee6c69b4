// Flash attention throughput at Wan 2.1 1.3B shapes: self-attention over 1,950 tokens (q, k, v
// views into one [tokens, 3, heads, head_dim] projection) and cross-attention of 1,950 queries
// over 512 text keys; 12 heads x 128. Reports GFLOP/s with flops = 4 q_len kv_len head_dim heads
// (the two matrix products; the softmax is not counted). The CrossTextRows cases attend 78 keys
// the way the DiT does for a 77-token prompt (the real rows plus one zero row counted 435 times,
// docs/wan-dit.md), their GFLOP/s counted over those 78 keys. Run with OMP_NUM_THREADS set.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/flash_attention.h"

namespace vidax {
namespace {

constexpr int64_t kHeads = 12, kHeadDim = 128, kTokens = 1950, kTextTokens = 512;
constexpr int64_t kPromptRows = 78;  // 77 prompt tokens + the one padding row standing for 435

// kF32, or a bf16 kernel.
enum class Path { kF32, kBf16Auto, kBf16Widened, kBf16Avx512, kBf16Amx };

AttentionBf16Kernel bf16_kernel(Path path) {
  switch (path) {
    case Path::kBf16Widened:
      return AttentionBf16Kernel::kWidened;
    case Path::kBf16Avx512:
      return AttentionBf16Kernel::kAvx512Bf16;
    case Path::kBf16Amx:
      return AttentionBf16Kernel::kAmx;
    default:
      return AttentionBf16Kernel::kAuto;
  }
}

void run_attention(benchmark::State& state, Path path, bool self, bool prompt_rows = false) {
  const int64_t row = kHeads * kHeadDim;
  const int64_t q_len = kTokens, kv_len = self ? kTokens : prompt_rows ? kPromptRows : kTextTokens;
  // Self: one qkv buffer [tokens, 3, heads, head_dim]; cross: q from it, k/v [512, heads, dim].
  std::mt19937 gen(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> qkv(static_cast<size_t>(q_len * 3 * row)),
      kv(static_cast<size_t>(2 * kv_len * row));
  for (float& x : qkv) x = dist(gen);
  for (float& x : kv) x = dist(gen);
  std::vector<BFloat16> qkv_b(qkv.size()), kv_b(kv.size());
  for (size_t i = 0; i < qkv.size(); ++i) qkv_b[i].bits = f32_to_bf16(qkv[i]);
  for (size_t i = 0; i < kv.size(); ++i) kv_b[i].bits = f32_to_bf16(kv[i]);
  std::vector<float> out(static_cast<size_t>(q_len * row));

  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  AttentionDims d{q_len, kv_len, kv_len, kHeads, kHeadDim, 3 * row, 3 * row, 3 * row, row, scale};
  int64_t k_off = row, v_off = 2 * row;
  if (!self) {
    d.k_stride = d.v_stride = row;
    k_off = 0;
    v_off = kv_len * row;
  }
  if (prompt_rows) d.kv_last_repeat = kTextTokens - kPromptRows + 1;
  auto call = [&] {
    if (path == Path::kF32) {
      const float* kvp = self ? qkv.data() : kv.data();
      flash_attention(qkv.data(), kvp + k_off, kvp + v_off, out.data(), d);
    } else {
      const BFloat16* kvp = self ? qkv_b.data() : kv_b.data();
      flash_attention_bf16(bf16_kernel(path), qkv_b.data(), kvp + k_off, kvp + v_off, out.data(),
                           d);
    }
  };
  if (path != Path::kF32 && !flash_attention_bf16_available(bf16_kernel(path))) {
    state.SkipWithError("kernel not available on this machine");
    return;
  }
  call();  // warm-up: page in the buffers
  for (auto _ : state) {
    call();
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double flops = 4.0 * static_cast<double>(q_len * kv_len * kHeadDim * kHeads);
  state.counters["GFLOP/s"] = benchmark::Counter(
      flops * static_cast<double>(state.iterations()) * 1e-9, benchmark::Counter::kIsRate);
  state.SetLabel(flash_attention_target());
}

void BM_AttentionSelfF32(benchmark::State& s) { run_attention(s, Path::kF32, true); }
void BM_AttentionSelfBf16(benchmark::State& s) { run_attention(s, Path::kBf16Auto, true); }
void BM_AttentionSelfBf16Widened(benchmark::State& s) {
  run_attention(s, Path::kBf16Widened, true);
}
void BM_AttentionSelfBf16Avx512(benchmark::State& s) { run_attention(s, Path::kBf16Avx512, true); }
void BM_AttentionSelfBf16Amx(benchmark::State& s) { run_attention(s, Path::kBf16Amx, true); }
void BM_AttentionCrossF32(benchmark::State& s) { run_attention(s, Path::kF32, false); }
void BM_AttentionCrossBf16(benchmark::State& s) { run_attention(s, Path::kBf16Auto, false); }
void BM_AttentionCrossTextRowsF32(benchmark::State& s) {
  run_attention(s, Path::kF32, false, true);
}
void BM_AttentionCrossTextRowsBf16(benchmark::State& s) {
  run_attention(s, Path::kBf16Auto, false, true);
}

BENCHMARK(BM_AttentionSelfF32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionSelfBf16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionSelfBf16Widened)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionSelfBf16Avx512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionSelfBf16Amx)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionCrossF32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionCrossBf16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionCrossTextRowsF32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionCrossTextRowsBf16)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace vidax
