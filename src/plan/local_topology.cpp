#include "plan/local_topology.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/buffer.h"
#include "core/convert.h"
#include "core/error.h"
#include "kernels/cpu/flash_attention.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/peak.h"
#include "models/wan/dit_random.h"
#include "models/wan/dit_schedule.h"
#include "models/wan/dit_tensors.h"
#include "models/wan/vae.h"
#include "models/wan/vae_random.h"
#include "models/wan/vae_schedule.h"
#include "nn/conv3d.h"
#include "pipeline/video_request.h"

namespace vidax::plan {
namespace {

using Clock = std::chrono::steady_clock;

// The median of repeated runs after a warm-up: at least `runs` of them and at least a quarter
// of a second (short kernels are timed many times; the machine's clock settles meanwhile).
template <typename Fn>
double median_seconds(int runs, Fn&& fn) {
  fn();  // warm-up (packing caches, page faults)
  std::vector<double> t;
  double total = 0;
  for (int i = 0; i < runs || total < 0.25; ++i) {
    const auto t0 = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    total += t.back();
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

Tensor ramp(const Shape& shape) {
  std::vector<float> v(static_cast<size_t>(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 13) * 0.01f - 0.06f;
  return Tensor::from_floats(v, shape);
}

// An activation of `n` small values in the aligned buffers the models use, in f32 and in bf16;
// `data(compute)` is the one a kernel computing in `compute` reads.
class RampInput {
 public:
  explicit RampInput(size_t n) : f32_(n), bf16_(n) {
    for (size_t i = 0; i < n; ++i) f32_.data()[i] = 0.01f * static_cast<float>(i % 7);
    convert_floats_serial(f32_.data(), DType::kF32, bf16_.data(), DType::kBF16, n);
  }
  const void* data(DType compute) const {
    return compute == DType::kBF16 ? static_cast<const void*>(bf16_.data())
                                   : static_cast<const void*>(f32_.data());
  }

 private:
  Buffer<float> f32_;
  Buffer<BFloat16> bf16_;
};

// FLOP/s of the DiT block's big GEMM shapes (q|k|v, FFN in with its GELU, FFN out) over `rows`
// rows, with the aligned buffers the model uses.
double gemm_rate(const wan::DitConfig& c, int64_t rows, DType compute) {
  double flops = 0, seconds = 0;
  for (const auto& [w, epilogue] : {std::pair{Shape{3 * c.dim, c.dim}, GemmEpilogue::kNone},
                                    std::pair{Shape{c.ffn_dim, c.dim}, GemmEpilogue::kGeluTanh},
                                    std::pair{Shape{c.dim, c.ffn_dim}, GemmEpilogue::kNone}}) {
    // Four copies of the weights taken in turn: as in the model, where every block has its own,
    // the weights arrive from memory rather than from cache.
    std::vector<PackedLinear> lins;
    lins.reserve(4);
    for (int i = 0; i < 4; ++i) lins.emplace_back(ramp(w), Tensor(), compute, epilogue);
    const RampInput input(static_cast<size_t>(rows * w[1]));
    const void* x = input.data(compute);
    Buffer<float> y(static_cast<size_t>(rows * w[0]));
    size_t turn = 0;
    seconds += median_seconds(3, [&] { lins[turn++ % lins.size()].forward(x, rows, y.data()); });
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
    convert_floats_serial(q.data(), DType::kF32, q16.data(), DType::kBF16, n);
    s = median_seconds(2,
                       [&] { flash_attention(q16.data(), q16.data(), q16.data(), out.data(), d); });
  } else {
    s = median_seconds(2, [&] { flash_attention(q.data(), q.data(), q.data(), out.data(), d); });
  }
  return 4.0 * static_cast<double>(tokens * tokens * hd * heads) / s;
}

// FLOP/s of the Wan VAE's dominant convolutions (causal 3x3x3, C -> C, one new frame behind two
// carried ones), as the VAE runs them in `compute` (bf16 widened to f32 where this machine has no
// oneDNN bf16 convolution): 96 channels at the frame's `height` x `width` and 192 at half of it
// (the last two decoder stages, where nearly all of its FLOPs are).
double conv_rate(DType compute, int64_t height, int64_t width) {
  struct Shape3 {
    int64_t channels, h, w;
  };
  double flops = 0, seconds = 0;
  for (const Shape3 sh : {Shape3{96, height, width}, Shape3{192, height / 2, width / 2}}) {
    const int64_t c = sh.channels, h = sh.h, w = sh.w;
    Conv3dParams p;
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
    const Conv3d conv(ramp(Shape{c, c, 3, 3, 3}), Tensor(), p, compute);
    const RampInput input(static_cast<size_t>(3 * h * w * c));  // two carried frames + one new
    const void* x = input.data(compute);
    Buffer<float> y(static_cast<size_t>(h * w * c));
    seconds += median_seconds(3, [&] { conv.forward(x, 3, h, w, y.data()); });
    flops += 2.0 * 27.0 * static_cast<double>(c * c * h * w);
  }
  return flops / seconds;
}

// Seconds one more latent frame adds to a real decode (random weights) of height x width in
// `precision`: decodes of two and of three latent frames, timed after a warm-up decode (oneDNN
// creates its primitives on the first call of each extent), their difference.
double vae_frame_seconds(const wan::VaeConfig& c, int64_t height, int64_t width,
                         wan::Precision precision) {
  wan::WanVae vae(c, wan::random_vae_weights(c, DType::kBF16, 7), precision,
                  wan::VaeParts::kDecoder);
  const int64_t ss = c.spatial_stride();
  const auto latent = [&](int64_t frames) {
    const Shape shape{c.z_dim, frames, height / ss, width / ss};
    std::vector<float> z(static_cast<size_t>(shape.numel()));
    for (size_t i = 0; i < z.size(); ++i) z[i] = static_cast<float>(i % 9) * 0.1f - 0.4f;
    return Tensor::from_floats(z, shape);
  };
  const Tensor two = latent(2), three = latent(3);
  const wan::FrameSink sink = [](const Tensor&) {};
  const auto timed = [&](const Tensor& z) {
    const auto t0 = std::chrono::steady_clock::now();
    vae.decode(z, sink);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  (void)timed(two);
  const double t2 = timed(two);
  return timed(three) - t2;
}

// Bytes/s of a streaming y += x pass (2 reads, 1 write) over 64 MiB.
double memory_rate() {
  const size_t n = size_t{16} << 20;
  std::vector<float> x(n, 1.0f), y(n, 2.0f);
  const double s = median_seconds(3, [&] {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < static_cast<int64_t>(n); ++i)
      y[static_cast<size_t>(i)] += x[static_cast<size_t>(i)];
  });
  return 3.0 * static_cast<double>(n) * 4 / s;
}

// Bytes/s of checkpoint weights (bf16, as published) turned into a packed block: what a block of
// --weights sharded costs after its gather (the loader builds the block's linears again, fused
// q|k|v included). The runtime's own constructor on weights already in memory: two blocks less
// one block (the embeddings and head cancel).
double pack_rate(const wan::DitConfig& c, wan::Precision precision) {
  double seconds[2] = {0, 0};
  for (int layers : {1, 2}) {
    wan::DitConfig cut = c;
    cut.num_layers = layers;
    const wan::WeightFn random = wan::random_dit_weights(cut, DType::kBF16, 3);
    std::map<std::string, Tensor> stored;
    for (const auto& d : wan::dit_tensor_decls(cut)) stored.emplace(d.name, random(d.name));
    const wan::WeightFn weights = [&](const std::string& name) { return stored.at(name); };
    seconds[layers - 1] = median_seconds(3, [&] { const wan::WanDit m(cut, weights, precision); });
  }
  const double block = std::max(seconds[1] - seconds[0], 0.5 * seconds[1]);
  return wan::dit_block_checkpoint_bytes(c, 2) / block;
}

// Runs `measure` (a rate) on `copies` threads at once, each single-threaded (nested parallel
// regions are inactive), as `copies` processes would share the machine; the slowest copy's rate.
template <typename Fn>
double concurrent_rate(int copies, Fn&& measure) {
  if (copies <= 1) return measure();
  std::vector<double> rates(static_cast<size_t>(copies), 0.0);
  std::exception_ptr error;
#pragma omp parallel num_threads(copies)
  {
    try {
      rates[static_cast<size_t>(omp_get_thread_num())] = measure();
    } catch (...) {
#pragma omp critical(vidax_local_topology)
      error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  double slowest = 0;  // over the copies that ran (the runtime may give fewer threads)
  for (double r : rates)
    if (r > 0) slowest = slowest > 0 ? std::min(slowest, r) : r;
  VIDAX_CHECK(slowest > 0, "local topology: no measurement ran");
  return slowest;
}

// Seconds of one real DiT block (the runtime's code, random weights of the request's sizes) over
// `rows` tokens, its text context already cached, as each of `copies` copies running at once
// sees it (single-threaded copies time-sliced on the cores, as that many processes run): a
// forward of two blocks less one of one block (the embeddings and head cancel), each timed as
// the copies' throughput: every copy builds its model, all start together and run `runs`
// forwards, and the wall time until the last one finishes, over `runs`, is one forward at its
// share of the cores. (Each copy's own median would let a copy that finishes early hand its
// share to the others, which then look faster than the processes are.) What the
// microbenchmarks miss (the per-layer weights arriving cold, the glue between the kernels) shows
// up here. `rows` is rounded up to a whole grid of at most 64 tokens a row.
double block_seconds(const wan::DitConfig& c, int64_t rows, wan::Precision precision, int copies) {
  const int64_t w = std::min<int64_t>(rows, 64), h = (rows + w - 1) / w;
  const int runs = 3;
  double seconds[2] = {0, 0};
  for (int layers : {1, 2}) {
    wan::DitConfig cut = c;
    cut.num_layers = layers;
    // One copy: its model, a sample of h x w tokens, a warm-up forward (packing caches, page
    // faults, the context's keys).
    const auto build = [&](std::unique_ptr<wan::WanDit>& model, wan::DitSample& s) {
      model = std::make_unique<wan::WanDit>(cut, wan::random_dit_weights(cut, DType::kBF16, 7),
                                            precision);
      const Shape grid{c.patch[0], h * c.patch[1], w * c.patch[2]};
      if (c.kind == wan::DitKind::kI2V) {  // the noisy latent, then the image conditioning
        s.x = ramp(Shape{c.out_dim, grid[0], grid[1], grid[2]});
        s.y = ramp(Shape{c.in_dim - c.out_dim, grid[0], grid[1], grid[2]});
        if (c.image_branch()) s.clip_fea = ramp(Shape{1, 257, c.clip_dim});
      } else {
        s.x = ramp(Shape{c.in_dim, grid[0], grid[1], grid[2]});
      }
      s.context = ramp(Shape{c.text_len, c.text_dim});
      s.t = Tensor::from_floats(std::vector<float>{500.0f}, Shape{1});
      model->forward(s);
    };
    std::vector<double> rounds;
    for (int round = 0; round < 3; ++round) {
      Clock::time_point start;
      if (copies <= 1) {  // the process's own threads
        std::unique_ptr<wan::WanDit> model;
        wan::DitSample s;
        build(model, s);
        start = Clock::now();
        for (int i = 0; i < runs; ++i) model->forward(s);
      } else {
        std::exception_ptr error;  // read after the region
        std::atomic<bool> failed{false};
        const auto keep = [&] {
#pragma omp critical(vidax_local_topology)
          error = std::current_exception();
          failed = true;
        };
#pragma omp parallel num_threads(copies)
        {
          std::unique_ptr<wan::WanDit> model;
          wan::DitSample s;
          try {
            build(model, s);
          } catch (...) {
            keep();
          }
#pragma omp barrier
#pragma omp single
          start = Clock::now();  // the single's end is a barrier: every copy starts after it
          if (!failed) {
            try {
              for (int i = 0; i < runs; ++i) model->forward(s);
            } catch (...) {
              keep();
            }
          }
        }
        if (error) std::rethrow_exception(error);
      }
      rounds.push_back(std::chrono::duration<double>(Clock::now() - start).count() / runs);
    }
    std::sort(rounds.begin(), rounds.end());
    seconds[layers - 1] = rounds[1];  // the median of three
  }
  return std::max(seconds[1] - seconds[0], 0.5 * seconds[1]);
}

// One thread's memcpy bandwidth over 32 MiB.
double copy_rate() {
  const size_t n = size_t{32} << 20;
  std::vector<char> a(n, 1), b(n, 2);
  const double s = median_seconds(3, [&] { std::memcpy(b.data(), a.data(), n); });
  return 2.0 * static_cast<double>(n) / s;
}

// The topology's collective_fits from `vidax bench comm --json`: per kind and group size, the
// line through the smallest and the largest message of its loaded_collectives (the collective
// between computing ranks): the slope's rate, the idle time of the smallest message as the
// latency (what waiting for the last rank adds is priced apart, by collective_waits). Without
// loaded_collectives (an older bench comm), the idle alpha_beta fit of the world group.
nlohmann::json collective_fits(const nlohmann::json& comm, int processes) {
  nlohmann::json fits = nlohmann::json::array();
  std::map<std::pair<std::string, int>, std::vector<const nlohmann::json*>> points;
  const nlohmann::json loaded = comm.value("loaded_collectives", nlohmann::json::array());
  for (const auto& p : loaded)
    points[{p.at("collective").get<std::string>(), p.at("group").get<int>()}].push_back(&p);
  for (auto& [key, list] : points) {
    const auto bytes = [](const nlohmann::json* p) {
      return p->at("bytes_sent_per_rank").get<double>();
    };
    std::sort(list.begin(), list.end(), [&](auto* a, auto* b) { return bytes(a) < bytes(b); });
    const nlohmann::json &small = *list.front(), &large = *list.back();
    const double dt = (large.at("loaded_us").get<double>() - small.at("loaded_us").get<double>());
    if (list.size() < 2 || !(dt > 0) || !(bytes(&large) > bytes(&small))) continue;
    fits.push_back({{"collective", key.first},
                    {"group", key.second},
                    {"latency_us", small.at("idle_us").get<double>()},
                    {"GBps", (bytes(&large) - bytes(&small)) / dt * 1e-3}});
  }
  if (!fits.empty() || processes < 2) return fits;
  for (const auto& [kind, f] : comm.at("alpha_beta").items()) {
    const double gbps = f.at("gbytes_per_second").get<double>();
    const double lat = f.at("latency_seconds").get<double>();
    if (gbps > 0 && lat >= 0)
      fits.push_back(
          {{"collective", kind}, {"group", processes}, {"latency_us", lat * 1e6}, {"GBps", gbps}});
  }
  return fits;
}

}  // namespace

Topology local_topology(const LocalCalibration& cal) {
  if (cal.processes < 1) throw_input_error("--devices: the local topology needs N >= 1 processes");
  const int cores = cal.cores > 0 ? cal.cores : omp_get_num_procs();
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
  const DType compute = bf16 ? DType::kBF16 : DType::kF32;
  VIDAX_CHECK(cal.rows >= 1, "local topology: no rows to calibrate at");
  // Single-threaded processes run side by side: measure them side by side (they share the
  // memory system); with several threads per process one process is measured alone.
  const int copies = threads == 1 ? std::min(cal.processes, cores) : 1;
  // The real block runs as the processes will: all of them at once, time-sliced when there are
  // more than cores (what sharing a core costs beyond its share shows up in the block's time).
  const int block_copies = threads == 1 ? std::min(cal.processes, 4 * cores) : 1;
  const double attn = concurrent_rate(copies, [&] {
    return attention_rate(cal.config, std::clamp<int64_t>(cal.tokens, 64, 2048), bf16);
  });
  const double mem = concurrent_rate(copies, [&] { return memory_rate(); });
  const double pack = concurrent_rate(copies, [&] { return pack_rate(cal.config, cal.precision); });
  // The VAE's convolutions in both precisions, as shares of the peaks they are priced at (the
  // topology's bf16 figure, which holds the f32 peak for an fp32 calibration, and the f32 peak).
  // At the request's frame size, scaled down to at most 416x240 pixels (the calibration's time).
  const double cut = std::min(1.0, std::sqrt(416.0 * 240.0 / static_cast<double>(cal.height) /
                                             static_cast<double>(cal.width)));
  const int64_t conv_h = std::max<int64_t>(16, static_cast<int64_t>(cal.height * cut) / 16 * 16);
  const int64_t conv_w = std::max<int64_t>(16, static_cast<int64_t>(cal.width * cut) / 16 * 16);
  const double conv_bf16 =
      concurrent_rate(copies, [&] { return conv_rate(DType::kBF16, conv_h, conv_w); });
  const double conv_f32 =
      concurrent_rate(copies, [&] { return conv_rate(DType::kF32, conv_h, conv_w); });
  // A peak is at least what a kernel reached (the short FMA probe can read low).
  const double f32_peak = std::max(peak.f32_gflops * 1e9, conv_f32);
  // One more latent frame of a real decode, alone with this process's threads (as rank 0 decodes
  // while the others wait), at most 208x240 pixels: the three decodes take a few seconds.
  int64_t vh = 0, vw = 0;
  double vae_frame = 0;
  if (cal.vae) {
    const int64_t ss = cal.vae->spatial_stride();
    const double vcut = std::min(
        1.0, std::sqrt(208.0 * 240.0 / static_cast<double>(conv_h) / static_cast<double>(conv_w)));
    vh = std::max<int64_t>(ss, static_cast<int64_t>(conv_h * vcut) / ss * ss);
    vw = std::max<int64_t>(ss, static_cast<int64_t>(conv_w * vcut) / ss * ss);
    vae_frame = vae_frame_seconds(*cal.vae, vh, vw, cal.vae_precision);
  }
  // Per row count: the GEMM rate, one real block (timed as the processes' throughput), and that
  // block priced with the rates.
  struct AtRows {
    int64_t rows = 0;
    double gemm = 0;    // GEMM FLOP/s at these rows
    double block = 0;   // seconds of the real block
    double priced = 0;  // seconds the rates give it
  };
  const auto at_rows = [&](int64_t rank_rows) {
    AtRows a;
    a.rows = rank_rows;
    const int64_t rows = std::clamp<int64_t>(rank_rows, 64, 2048);
    a.gemm = concurrent_rate(copies, [&] { return gemm_rate(cal.config, rows, compute); });
    const int64_t block_rows = (std::clamp<int64_t>(rank_rows, 64, 4096) + 63) / 64 * 64;
    a.block = block_seconds(cal.config, block_rows, cal.precision, block_copies);
    // The block as the kernel rates price it (its context cached, as timed).
    wan::DitConfig one = cal.config;
    one.num_layers = 1;
    wan::DitScheduleRequest req;
    req.tokens = block_rows;
    req.precision = cal.precision;
    for (const auto& seg : wan::dit_forward_schedule(one, req, dist::MeshSpec{}).segments)
      for (const auto& op : seg.ops) {
        const double n = static_cast<double>(seg.repeat * op.calls);
        if (op.cls == dist::OpClass::kGemm) a.priced += n * op.flops / a.gemm;
        if (op.cls == dist::OpClass::kAttention) a.priced += n * op.flops / attn;
        if (op.cls == dist::OpClass::kMemory) a.priced += n * op.bytes / mem;
      }
    a.priced /= share;  // at each process's share of a core
    return a;
  };
  std::vector<int64_t> row_counts = cal.rows_set;
  row_counts.push_back(cal.rows);
  std::sort(row_counts.begin(), row_counts.end());
  row_counts.erase(std::unique(row_counts.begin(), row_counts.end()), row_counts.end());
  std::vector<AtRows> measured;
  for (int64_t r : row_counts)
    if (r >= 1) measured.push_back(at_rows(r));
  // How much slower the runtime is than its kernels' rates (> 1), at each row count: that row
  // count's real block over its price. The shares at those rows are divided by it, so a block
  // priced at its rows costs what it measured; a kernel rate timed slow or fast by the machine's
  // noise is corrected by the block priced with it. (A fit of one factor for the GEMMs and one
  // for attention over the row counts was tried: the block timings' noise moved its attention
  // factor between 0.6x and 3.9x from one calibration to the next.)
  const AtRows& own = *std::find_if(measured.begin(), measured.end(),
                                    [&](const AtRows& a) { return a.rows == cal.rows; });
  const auto slowdown = [](const AtRows& a) { return a.block / a.priced; };
  omp_set_num_threads(1);
  const double copy = copy_rate();
  omp_set_num_threads(saved);

  double port = copy / 2, latency = 30e-6;  // shared memory: copied in and out of a FIFO
  std::string comm_note =
      "shared-memory port estimated as half a memcpy's bandwidth, latency 30 us";
  nlohmann::json fits = nlohmann::json::array(), waits = nlohmann::json::array();
  if (!cal.comm_json.empty()) {
    try {
      const nlohmann::json j = nlohmann::json::parse(cal.comm_json);
      const auto& f = j.at("alpha_beta").at("all_to_all");
      latency = f.at("latency_seconds").get<double>();
      port = f.at("gbytes_per_second").get<double>() * 1e9;
      // Every kind's own fit (an all-reduce's arithmetic and a send_recv's pairing are not in
      // the all-to-all's port) and the waits between computing ranks, where the JSON has them.
      fits = collective_fits(j, cal.processes);
      for (const auto& w : j.value("collective_waits", nlohmann::json::array())) {
        const double compute_us = w.at("compute_us").get<double>();
        // Kept where the compute grows within a group (the format's rule): a noisy repeat of
        // the same point is dropped.
        if (waits.empty() || waits.back().at("group") != w.at("group") ||
            waits.back().at("compute_us").get<double>() < compute_us)
          waits.push_back({{"group", w.at("group").get<int>()},
                           {"compute_us", compute_us},
                           {"wait_us", w.at("wait_us").get<double>()}});
      }
    } catch (const nlohmann::json::exception& e) {
      throw_input_error(
          "--comm: expected the JSON of `vidax bench comm --json` with "
          "alpha_beta.<kind>.{latency_seconds,gbytes_per_second} and optional "
          "collective_waits[].{group,compute_us,wait_us} (",
          e.what(), ")");
    }
    if (!(port > 0) || !(latency >= 0))
      throw_input_error("--comm: alpha_beta.all_to_all has no usable fit (ran with one process?)");
    comm_note = str_cat("shared-memory port and latency from vidax bench comm; ", fits.size(),
                        " fits of collective kind and group size; waits at collectives at ",
                        waits.size(), " measured points");
  }
  const auto shares = [&](const AtRows& a) {
    const double slow = slowdown(a);
    return nlohmann::json{{"gemm", std::min(1.0, a.gemm / peak_rate / slow)},
                          {"attention", std::min(1.0, attn / peak_rate / slow)},
                          {"memory", std::min(1.0, 1.0 / slow)}};
  };
  std::string blocks;
  nlohmann::json by_rows = nlohmann::json::array();
  for (const AtRows& a : measured) {
    blocks += str_cat(blocks.empty() ? "" : ", ", slowdown(a), "x at ", a.rows);
    nlohmann::json e = shares(a);
    e["rows"] = a.rows;
    by_rows.push_back(e);
  }
  // The real decoder's latent frame against its schedule priced with the rates above: how much
  // slower it runs (its page handling, norms and copies beyond the bytes counted); the
  // convolution share of the request's VAE precision is divided by it, so a decode priced at
  // that size costs per latent frame what it measured.
  double vae_slow = 1;
  std::string vae_note;
  if (cal.vae) {
    const bool v32 = cal.vae_precision == wan::Precision::kFP32;
    const auto price = [&](int64_t latent_frames) {
      const dist::Schedule s =
          wan::vae_decode_schedule(*cal.vae, 1 + (latent_frames - 1) * cal.vae->temporal_stride(),
                                   vh, vw, cal.vae_precision);
      return s.flops(dist::OpClass::kConv) / (v32 ? conv_f32 : conv_bf16) +
             s.flops(dist::OpClass::kGemm) / own.gemm + s.flops(dist::OpClass::kAttention) / attn +
             s.memory_bytes() / mem;
    };
    vae_slow = std::max(0.1, vae_frame / (price(3) - price(2)));
    vae_note =
        str_cat("; a real ", v32 ? "fp32" : "bf16", " VAE decode at ", vw, "x", vh, " ran ",
                vae_slow, "x its price per latent frame (that convolution share divided by it)");
  }
  nlohmann::json efficiency = shares(own);
  const bool vae32 = cal.vae && cal.vae_precision == wan::Precision::kFP32;
  efficiency["conv"] = std::min(1.0, conv_bf16 / peak_rate / (cal.vae && !vae32 ? vae_slow : 1));
  efficiency["conv_fp32"] = std::min(1.0, conv_f32 / f32_peak / (vae32 ? vae_slow : 1));
  const double avail = available_memory_bytes();
  nlohmann::json t = {
      {"name", str_cat("local-", cal.processes)},
      {"device",
       {{"kind", "cpu"},
        {"bf16_tflops", peak_rate * share * 1e-12},
        {"fp32_tflops", f32_peak * share * 1e-12},
        {"memory_gib", (avail > 0 ? avail : 1e9) / cal.processes / 1073741824.0},
        {"memory_GBps", mem * share * 1e-9},
        {"pack_GBps", pack * share * 1e-9},
        {"background_shares_cores", true},
        {"efficiency", efficiency}}},
      {"fabric",
       {{"kind", "switch"},
        {"nodes", 1},
        {"devices_per_node", cal.processes},
        {"intra", {{"kind", "shm"}, {"GBps", port * 1e-9}, {"latency_us", 0.0}}}}},
      {"collective_latency_us", latency * 1e6},
      {"notes", str_cat("measured: ", threads, " thread(s) per process",
                        share < 1 ? str_cat(" sharing ", cores, " cores") : std::string(),
                        "; a real block ran ", blocks,
                        " rows the time its kernels' rates give (the shares at those rows "
                        "divided by it); ",
                        comm_note, vae_note)}};
  if (measured.size() > 1) t["device"]["efficiency_by_rows"] = by_rows;
  if (cal.processes > cores) t["device"]["time_shared_cores"] = cores;
  if (!fits.empty()) t["collective_fits"] = fits;
  if (!waits.empty()) t["collective_waits"] = waits;
  Topology topo = parse_topology(t.dump(), "local");
  topo.source = "measured";
  return topo;
}

}  // namespace vidax::plan
