#include "plan/local_topology.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/buffer.h"
#include "core/error.h"
#include "kernels/cpu/flash_attention.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/peak.h"
#include "pipeline/video_request.h"

namespace vidax::plan {
namespace {

using Clock = std::chrono::steady_clock;

template <typename Fn>
double best_seconds(int runs, Fn&& fn) {
  fn();  // warm-up (packing caches, page faults)
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = Clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

Tensor ramp(const Shape& shape) {
  std::vector<float> v(static_cast<size_t>(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 13) * 0.01f - 0.06f;
  return Tensor::from_floats(v, shape);
}

// FLOP/s of the DiT's two GEMM shapes (q|k|v and FFN-in) over `rows` rows.
double gemm_rate(const wan::DitConfig& c, int64_t rows, DType compute) {
  double flops = 0, seconds = 0;
  for (const Shape& w : {Shape{3 * c.dim, c.dim}, Shape{c.ffn_dim, c.dim}}) {
    const PackedLinear lin(ramp(w), Tensor(), compute);
    const size_t es = compute == DType::kBF16 ? 2 : 4;
    std::vector<std::byte> x(static_cast<size_t>(rows * c.dim) * es, std::byte{0x3c});
    if (compute == DType::kF32) {
      auto* f = reinterpret_cast<float*>(x.data());
      for (int64_t i = 0; i < rows * c.dim; ++i) f[i] = 0.01f * static_cast<float>(i % 7);
    }
    std::vector<float> y(static_cast<size_t>(rows * w[0]));
    seconds += best_seconds(3, [&] { lin.forward(x.data(), rows, y.data()); });
    flops += 2.0 * static_cast<double>(rows * w[0] * w[1]);
  }
  return flops / seconds;
}

double attention_rate(const wan::DitConfig& c, int64_t tokens, bool bf16) {
  const int64_t heads = std::min<int64_t>(c.num_heads, 4), hd = c.head_dim();
  AttentionDims d{};
  d.q_len = d.kv_len = d.kv_valid = tokens;
  d.heads = heads;
  d.head_dim = hd;
  d.q_stride = d.k_stride = d.v_stride = d.out_stride = heads * hd;
  d.scale = 0.1f;
  const auto n = static_cast<size_t>(tokens * heads * hd);
  std::vector<float> q(n), out(n);
  for (size_t i = 0; i < n; ++i) q[i] = static_cast<float>(i % 11) * 0.02f - 0.1f;
  double s;
  if (bf16) {
    std::vector<BFloat16> q16(n);
    for (size_t i = 0; i < n; ++i) q16[i] = BFloat16(q[i]);
    s = best_seconds(2,
                     [&] { flash_attention(q16.data(), q16.data(), q16.data(), out.data(), d); });
  } else {
    s = best_seconds(2, [&] { flash_attention(q.data(), q.data(), q.data(), out.data(), d); });
  }
  return 4.0 * static_cast<double>(tokens * tokens * hd * heads) / s;
}

// Bytes/s of a streaming y += x pass (2 reads, 1 write) over 64 MiB.
double memory_rate() {
  const size_t n = size_t{16} << 20;
  std::vector<float> x(n, 1.0f), y(n, 2.0f);
  const double s = best_seconds(3, [&] {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < static_cast<int64_t>(n); ++i)
      y[static_cast<size_t>(i)] += x[static_cast<size_t>(i)];
  });
  return 3.0 * static_cast<double>(n) * 4 / s;
}

// One thread's memcpy bandwidth over 32 MiB.
double copy_rate() {
  const size_t n = size_t{32} << 20;
  std::vector<char> a(n, 1), b(n, 2);
  const double s = best_seconds(3, [&] { std::memcpy(b.data(), a.data(), n); });
  return 2.0 * static_cast<double>(n) / s;
}

}  // namespace

Topology local_topology(const LocalCalibration& cal) {
  if (cal.processes < 1) throw_input_error("--devices: the local topology needs N >= 1 processes");
  const int cores = cal.cores > 0 ? cal.cores : omp_get_max_threads();
  const int threads = std::max(1, cores / cal.processes);
  // With more processes than cores each gets a share of one core.
  const double share = cal.processes > cores ? static_cast<double>(cores) / cal.processes : 1.0;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  const bool bf16 = cal.precision == wan::Precision::kBF16;
  const PeakFlops peak = measure_peak_flops(0.1);
  const double peak_rate =
      bf16 ? std::max({peak.amx_bf16_gflops, peak.bf16_gflops, peak.f32_gflops}) * 1e9
           : peak.f32_gflops * 1e9;
  const int64_t rows = std::clamp<int64_t>(cal.rows, 64, 2048);
  const double gemm = gemm_rate(cal.config, rows, bf16 ? DType::kBF16 : DType::kF32);
  const double attn = attention_rate(cal.config, std::clamp<int64_t>(cal.tokens, 64, 2048), bf16);
  const double mem = memory_rate();
  omp_set_num_threads(1);
  const double copy = copy_rate();
  omp_set_num_threads(saved);

  double port = copy / 2, latency = 30e-6;  // shared memory: copied in and out of a FIFO
  std::string comm_note =
      "shared-memory port estimated as half a memcpy's bandwidth, latency 30 us";
  if (!cal.comm_json.empty()) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(cal.comm_json);
      const auto& f = j.at("alpha_beta").at("all_to_all");
      latency = f.at("latency_seconds").get<double>();
      port = f.at("gbytes_per_second").get<double>() * 1e9;
    } catch (const nlohmann::json::exception& e) {
      throw_input_error(
          "--comm: expected the JSON of `vidax bench comm --json` with "
          "alpha_beta.all_to_all.{latency_seconds,gbytes_per_second} (",
          e.what(), ")");
    }
    if (!(port > 0) || !(latency >= 0))
      throw_input_error("--comm: alpha_beta.all_to_all has no usable fit (ran with one process?)");
    comm_note = "shared-memory port and latency from vidax bench comm";
  }
  const double avail = available_memory_bytes();
  nlohmann::json t = {
      {"name", str_cat("local-", cal.processes)},
      {"device",
       {{"kind", "cpu"},
        {"bf16_tflops", peak_rate * share * 1e-12},
        {"memory_gib", (avail > 0 ? avail : 1e9) / cal.processes / 1073741824.0},
        {"memory_GBps", mem * share * 1e-9},
        {"efficiency",
         {{"gemm", std::min(1.0, gemm / peak_rate)},
          {"attention", std::min(1.0, attn / peak_rate)},
          {"memory", 1.0}}}}},
      {"fabric",
       {{"kind", "switch"},
        {"nodes", 1},
        {"devices_per_node", cal.processes},
        {"intra", {{"kind", "shm"}, {"GBps", port * 1e-9}, {"latency_us", 0.0}}}}},
      {"collective_latency_us", latency * 1e6},
      {"notes", str_cat("measured: ", threads, " thread(s) per process",
                        share < 1 ? str_cat(" sharing ", cores, " cores") : std::string(), "; ",
                        comm_note)}};
  Topology topo = parse_topology(t.dump(), "local");
  topo.source = "measured";
  return topo;
}

}  // namespace vidax::plan
