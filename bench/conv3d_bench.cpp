// Conv3d through oneDNN, f32 vs bf16 (AMX where present), at the Wan 2.1 VAE decoder's layer
// shapes for a 832x480 video: the causal 3x3x3 convs of each resolution level (one new frame plus
// the 2 carried frames, as the streaming decoder runs them) and a 2-D 3x3 upsampler conv.
// Reports GFLOP/s (2 * MACs) as a counter. Run with
//   build/release/bench/vidax_microbench --benchmark_filter=Conv3d
#include <benchmark/benchmark.h>

#include <random>

#include "nn/conv3d.h"

namespace vidax {
namespace {

// args: cin, cout, kt, h, w, bf16
void BM_Conv3d(benchmark::State& state) {
  const int64_t cin = state.range(0), cout = state.range(1), kt = state.range(2);
  const int64_t h = state.range(3), w = state.range(4);
  const DType compute = state.range(5) ? DType::kBF16 : DType::kF32;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> wv(static_cast<size_t>(cout * cin * kt * 9)), bv(static_cast<size_t>(cout));
  for (auto& v : wv) v = nd(rng);
  Conv3dParams p;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
  const Tensor weight = kt == 1 ? Tensor::from_floats(wv, Shape{cout, cin, 3, 3})
                                : Tensor::from_floats(wv, Shape{cout, cin, kt, 3, 3});
  Conv3d conv(weight, Tensor::from_floats(bv, Shape{cout}), p, compute);
  const int64_t t_in = kt;  // one output frame
  Tensor x = Tensor::zeros(Shape{t_in, h, w, cin});
  float* xp = x.mutable_data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) xp[i] = nd(rng);
  const Tensor xin = x.to(compute);
  std::vector<float> y(static_cast<size_t>(h * w * cout));
  conv.forward(xin.raw_data(), t_in, h, w, y.data());  // create the primitive
  for (auto _ : state) {
    conv.forward(xin.raw_data(), t_in, h, w, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  const double flops = 2.0 * static_cast<double>(h * w * cout * cin * kt * 9);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(conv.implementation(t_in, h, w));
}

// Decoder levels of Wan 2.1 at 832x480 (latent 104x60): 384 ch at 1/8 and 1/4, 192 at 1/2,
// 96 at full resolution (one frame each).
BENCHMARK(BM_Conv3d)
    ->ArgNames({"cin", "cout", "kt", "h", "w", "bf16"})
    ->Args({384, 384, 3, 60, 104, 0})
    ->Args({384, 384, 3, 60, 104, 1})
    ->Args({384, 384, 3, 120, 208, 0})
    ->Args({384, 384, 3, 120, 208, 1})
    ->Args({192, 192, 3, 240, 416, 0})
    ->Args({192, 192, 3, 240, 416, 1})
    ->Args({96, 96, 3, 480, 832, 0})
    ->Args({96, 96, 3, 480, 832, 1})
    ->Args({192, 96, 1, 480, 832, 0})  // upsampler 2-D conv
    ->Args({192, 96, 1, 480, 832, 1})
    ->Args({96, 3, 3, 480, 832, 0})  // decoder head
    ->Args({96, 3, 3, 480, 832, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(0.5);

}  // namespace
}  // namespace vidax
