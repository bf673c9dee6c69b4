// `vidax bench attention`: one DiT self-attention layer at real shapes (Wan 1.3B heads by
// default) with random q/k/v, dense and with an attention policy. The dense time includes the
// bf16 conversion of q/k/v the DiT does; the sparse time is the plan's execution (gather,
// block-sparse executor, scatter), interleaved with the dense runs; the policy's planning
// (layout and mask construction) is timed on its own: mask_seconds from a fresh policy object
// (no cached plan), mask_steady_* for the next step's call on the same object.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/vidax/commands.h"
#include "core/buffer.h"
#include "core/convert.h"
#include "core/error.h"
#include "kernels/cpu/flash_attention.h"
#include "models/wan/dit.h"
#include "sparse/attention_policy.h"
#include "sparse/self_attention_op.h"
#include "sparse/sparse_attention.h"

namespace vidax::cli {
namespace {

struct AttentionBenchArgs {
  std::string size = "832x480", attention, precision = "bf16";
  int64_t frames = 81, heads = 12, head_dim = 128, repeat = 1, step = 0, layer = 0;
  bool json = false, no_dense = false;
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// CPU time of the whole process (all threads). On a shared machine wall time mostly measures the
// other jobs; with --threads 1 (and OMP_WAIT_POLICY=passive for more threads) CPU time is the
// steadier measure of the work itself.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void bench_attention(const AttentionBenchArgs& a) {
  const auto [width, height] = parse_size(a.size, "--size");
  if (width % 16 != 0 || height % 16 != 0)
    throw_input_error("--size: ", a.size, " must be multiples of 16 (VAE stride 8 x patch 2)");
  if (a.frames < 1 || (a.frames - 1) % 4 != 0)
    throw_input_error("--frames: ", a.frames, " must be 4k+1 (VAE temporal stride 4)");
  if (a.heads < 1 || a.head_dim < 1)
    throw_input_error("--heads and --head-dim must be >= 1, got ", a.heads, ", ", a.head_dim);
  if (a.repeat < 1) throw_input_error("--repeat: expected >= 1, got ", a.repeat);
  const bool bf16 = wan::parse_precision(a.precision, "--precision") == wan::Precision::kBF16;

  sparse::AttentionCall call;
  call.grid = {(a.frames - 1) / 4 + 1, height / 16, width / 16};
  call.heads = a.heads;
  call.head_dim = a.head_dim;
  call.layer = a.layer;
  call.layers = 30;
  call.step = a.step;
  call.steps = 50;
  call.timestep = 500;
  const int64_t tokens = call.grid.tokens(), dim = a.heads * a.head_dim;

  // [tokens, 3 * dim] = q | k | v, as the DiT's fused projection.
  Buffer<float> qkv(static_cast<size_t>(tokens * 3 * dim));  // huge pages, as the DiT's
#pragma omp parallel
  {
    std::mt19937 rng(1234u + static_cast<unsigned>(omp_get_thread_num()));
    std::normal_distribution<float> n(0.0f, 1.0f);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t e = 0; e < 3 * dim; ++e) qkv.data()[t * 3 * dim + e] = n(rng);
  }
  call.q = qkv.data();
  call.k = qkv.data() + dim;
  call.stride = 3 * dim;
  // bf16, as the DiT (dit_block.cpp): its RoPE pass writes the bf16 q and k (untimed here, as
  // the random q/k stand for RoPE's output); v is converted before attention, timed with each
  // side below. Policies and the sparse gathers read the bf16 copies.
  Buffer<BFloat16> qkv16(bf16 ? qkv.size() : 0);
  auto convert_v = [&] {
    const auto stride = static_cast<size_t>(3 * dim);
    convert_float_rows(qkv.data() + 2 * dim, DType::kF32, stride, qkv16.data() + 2 * dim,
                       DType::kBF16, stride, static_cast<size_t>(tokens), static_cast<size_t>(dim));
  };
  if (bf16) {
    convert_floats(qkv.data(), DType::kF32, qkv16.data(), DType::kBF16, qkv.size());
    call.q16 = qkv16.data();
    call.k16 = qkv16.data() + dim;
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.head_dim));

  // Planning: the first call of a fresh policy (per-grid layouts and masks built, no cached
  // plan), then the next step's call on the same policy: what every later call of a generation
  // pays (with route_every / shape_every = 1 it routes / chooses shapes again). Wall and CPU.
  double mask_seconds = std::numeric_limits<double>::infinity(), mask_cpu = mask_seconds;
  double steady_seconds = mask_seconds, steady_cpu = mask_seconds;
  sparse::AttentionPlan plan;
  std::string name;
  sparse::SelfAttentionOp op;  // the DiT's own self-attention op (sparse/self_attention_op.h)
  for (int64_t r = 0; r < a.repeat; ++r) {
    std::shared_ptr<sparse::AttentionPolicy> policy = sparse::make_attention_policy(a.attention);
    name = policy->name();
    op.set_policy(policy);
    auto t0 = Clock::now();
    double c0 = cpu_seconds();
    plan = op.plan(call);
    mask_cpu = std::min(mask_cpu, cpu_seconds() - c0);
    mask_seconds = std::min(mask_seconds, seconds_since(t0));
    sparse::AttentionCall next = call;
    ++next.step;
    t0 = Clock::now();
    c0 = cpu_seconds();
    const sparse::AttentionPlan again = op.plan(next);
    steady_cpu = std::min(steady_cpu, cpu_seconds() - c0);
    steady_seconds = std::min(steady_seconds, seconds_since(t0));
  }

  std::vector<float> out(static_cast<size_t>(tokens * dim));
  sparse::AttentionIo io;
  io.q = qkv.data();
  io.k = qkv.data() + dim;
  io.v = qkv.data() + 2 * dim;
  io.stride = 3 * dim;
  io.tokens = tokens;
  io.heads = a.heads;
  io.head_dim = a.head_dim;
  io.scale = scale;
  io.bf16 = bf16;
  if (bf16) {
    io.q16 = qkv16.data();
    io.k16 = qkv16.data() + dim;
    io.v16 = qkv16.data() + 2 * dim;
  }
  io.out = out.data();
  io.out_stride = dim;
  double sparse_seconds = std::numeric_limits<double>::infinity();
  double sparse_cpu = std::numeric_limits<double>::infinity();
  // The DiT's dense path: (bf16 conversion of v) + flash attention, interleaved with the
  // sparse runs (sparse, dense, sparse, dense, ...) so both see the same machine load.
  double dense_seconds = std::numeric_limits<double>::quiet_NaN();
  double dense_cpu = std::numeric_limits<double>::quiet_NaN();
  double rel_l2 = std::numeric_limits<double>::quiet_NaN();
  std::vector<float> dense;
  if (!a.no_dense) {
    dense.resize(out.size());
    dense_seconds = dense_cpu = std::numeric_limits<double>::infinity();
  }
  for (int64_t r = 0; r < a.repeat; ++r) {
    auto t0 = Clock::now();
    double c0 = cpu_seconds();
    if (bf16) convert_v();
    op.execute(&plan, call, io);
    sparse_cpu = std::min(sparse_cpu, cpu_seconds() - c0);
    sparse_seconds = std::min(sparse_seconds, seconds_since(t0));
    if (a.no_dense) continue;
    t0 = Clock::now();
    c0 = cpu_seconds();
    if (bf16) convert_v();
    sparse::AttentionIo dense_io = io;
    dense_io.out = dense.data();
    op.execute(nullptr, call, dense_io);  // the dense path, as the DiT takes it
    dense_cpu = std::min(dense_cpu, cpu_seconds() - c0);
    dense_seconds = std::min(dense_seconds, seconds_since(t0));
  }
  if (!a.no_dense) {
    double err = 0, ref = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      err += (static_cast<double>(out[i]) - dense[i]) * (static_cast<double>(out[i]) - dense[i]);
      ref += static_cast<double>(dense[i]) * dense[i];
    }
    rel_l2 = std::sqrt(err / ref);
  }

  const double density = sparse::plan_density(plan, a.heads);
  auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); };
  const nlohmann::json j = {{"attention", name},
                            {"tokens", tokens},
                            {"grid", {call.grid.frames, call.grid.height, call.grid.width}},
                            {"heads", a.heads},
                            {"head_dim", a.head_dim},
                            {"precision", bf16 ? "bf16" : "fp32"},
                            {"density", density},
                            {"dense_seconds", num(dense_seconds)},
                            {"sparse_seconds", sparse_seconds},
                            {"mask_seconds", mask_seconds},
                            {"mask_cpu_seconds", mask_cpu},
                            {"mask_fraction", mask_seconds / sparse_seconds},
                            {"mask_steady_seconds", steady_seconds},
                            {"mask_steady_cpu_seconds", steady_cpu},
                            {"mask_steady_fraction_cpu", steady_cpu / sparse_cpu},
                            {"speedup", num(dense_seconds / sparse_seconds)},
                            {"dense_cpu_seconds", num(dense_cpu)},
                            {"sparse_cpu_seconds", sparse_cpu},
                            {"speedup_cpu", num(dense_cpu / sparse_cpu)},
                            {"target_speedup", 0.8 / density},
                            {"rel_l2_vs_dense", num(rel_l2)},
                            {"repeat", a.repeat},
                            {"threads", omp_get_max_threads()},
                            {"kernel", flash_attention_target()}};
  if (a.json) {
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("%s on %lld tokens (%lldx%lldx%lld), %lld heads x %lld, %s, %s\n", name.c_str(),
              static_cast<long long>(tokens), static_cast<long long>(call.grid.frames),
              static_cast<long long>(call.grid.height), static_cast<long long>(call.grid.width),
              static_cast<long long>(a.heads), static_cast<long long>(a.head_dim),
              bf16 ? "bf16" : "fp32", flash_attention_target().c_str());
  std::printf(
      "density %.4f  sparse %.4f s  mask %.5f s first call (%.2f%% of sparse), %.5f s CPU next "
      "call (%.2f%% of sparse CPU)\n",
      density, sparse_seconds, mask_seconds, 100 * mask_seconds / sparse_seconds, steady_cpu,
      100 * steady_cpu / sparse_cpu);
  if (!a.no_dense)
    std::printf(
        "dense %.4f s  speedup %.2fx, in CPU time %.2fx (target 0.8/density = %.2fx)  rel L2 vs "
        "dense %.4f\n",
        dense_seconds, dense_seconds / sparse_seconds, dense_cpu / sparse_cpu, 0.8 / density,
        rel_l2);
}

}  // namespace

void register_bench_attention(CLI::App* bench) {
  auto a = std::make_shared<AttentionBenchArgs>();
  auto* cmd = bench->add_subcommand(
      "attention", "Time one self-attention layer, dense and with an attention policy");
  cmd->add_option("--attention", a->attention, "policy spec (see vidax generate --help)")
      ->required();
  cmd->add_option("--frames", a->frames, "video frames, 4k+1 (default 81)");
  cmd->add_option("--size", a->size, "WIDTHxHEIGHT in pixels (default 832x480)");
  cmd->add_option("--heads", a->heads, "attention heads (default 12, Wan 1.3B)");
  cmd->add_option("--head-dim", a->head_dim, "channels per head (default 128)");
  cmd->add_option("--precision", a->precision, "bf16 | fp32 (default bf16)");
  cmd->add_option("--repeat", a->repeat, "timed runs of each variant; the minimum is reported");
  cmd->add_option("--layer", a->layer, "layer index the policy sees (default 0)");
  cmd->add_option("--step", a->step, "denoising step the policy sees (default 0)");
  cmd->add_flag("--no-dense", a->no_dense, "skip the dense run (no speedup reported)");
  cmd->add_flag("--json", a->json, "print one JSON object");
  cmd->callback([a] { bench_attention(*a); });
}

}  // namespace vidax::cli
