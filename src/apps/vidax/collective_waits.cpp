#include "apps/vidax/collective_waits.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/buffer.h"
#include "core/convert.h"
#include "core/error.h"
#include "core/tensor.h"
#include "kernels/cpu/gemm.h"

namespace vidax::cli {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

volatile float g_sink = 0;  // keeps the work's result alive

// The model's kind of work: bf16 GEMMs of a DiT block's shape (rows x dim -> dim) taking turns
// over four weight copies, so that weights stream from memory as in a forward.
struct GemmWork {
  static constexpr int64_t kRows = 64, kDim = 1536;
  std::vector<PackedLinear> weights;
  Buffer<BFloat16> x{static_cast<size_t>(kRows * kDim)};
  Buffer<float> y{static_cast<size_t>(kRows * kDim)};
  size_t turn = 0;
  GemmWork() {
    std::vector<float> w(static_cast<size_t>(kDim * kDim));
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 13) * 0.01f - 0.06f;
    for (int i = 0; i < 4; ++i)
      weights.emplace_back(Tensor::from_floats(w, Shape{kDim, kDim}), Tensor(), DType::kBF16);
    std::vector<float> x32(x.size());
    for (size_t i = 0; i < x32.size(); ++i) x32[i] = 0.01f * static_cast<float>(i % 7);
    convert_floats_serial(x32.data(), DType::kF32, x.data(), DType::kBF16, x32.size());
  }
  float run(int64_t calls) {
    for (int64_t i = 0; i < calls; ++i)
      weights[turn++ % weights.size()].forward(x.data(), kRows, y.data());
    return y.data()[0];
  }
};

// The slowest rank's value.
double world_max(dist::Group& world, double seconds) {
  float v = static_cast<float>(seconds);
  world.all_reduce(&v, 1, DType::kF32, dist::ReduceOp::kMax);
  return v;
}

// Calls of `work` per second of wall time, all ranks computing at once (the slowest
// rank's rate: every rank then computes the same amount).
template <typename Work>
double work_rate(dist::Group& world, Work& work) {
  world.barrier();
  const auto t0 = Clock::now();
  int64_t done = 0;
  while (since(t0) < 0.15) {
    g_sink = g_sink + work(1);
    ++done;
  }
  const double per_iteration = since(t0) / static_cast<double>(done);
  return 1.0 / world_max(world, per_iteration);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per iteration (the slowest rank's, medians over rounds) of `loops` x work(calls)
// ("free"), of `loops` x (work(calls); op()) ("with"), and of `loops` x op() ("alone").
struct Between {
  double free = 0, with = 0, alone = 0;
};
template <typename Work, typename Op>
Between time_between(dist::Group& world, Work& work, int64_t calls, int64_t loops, int rounds,
                     Op&& op) {
  std::vector<double> free_s, with_s, alone_s;
  const auto per_loop = [&](Clock::time_point t0) {
    return world_max(world, since(t0)) / static_cast<double>(loops);
  };
  for (int round = 0; round < rounds; ++round) {
    world.barrier();
    auto t0 = Clock::now();
    for (int64_t i = 0; i < loops; ++i) g_sink = g_sink + work(calls);
    free_s.push_back(per_loop(t0));
    world.barrier();
    t0 = Clock::now();
    for (int64_t i = 0; i < loops; ++i) {
      g_sink = g_sink + work(calls);
      op();
    }
    with_s.push_back(per_loop(t0));
    world.barrier();
    t0 = Clock::now();
    for (int64_t i = 0; i < loops; ++i) op();
    alone_s.push_back(per_loop(t0));
  }
  return {median(free_s), median(with_s), median(alone_s)};
}

// One call of `kind` on `group` moving `per_peer` bytes to each peer (all_to_all, all_gather,
// send_recv: the message; all_reduce and broadcast: the whole vector of per_peer * n bytes),
// and the bytes one rank sends for it (bench comm's convention).
struct Transfer {
  std::function<void()> run;
  double bytes_sent = 0;
};
Transfer make_transfer(dist::Group& g, const std::string& kind, int64_t per_peer,
                       std::vector<std::byte>& in, std::vector<std::byte>& out) {
  const int n = g.size();
  const int64_t floats = std::max<int64_t>(1, per_peer / 4);
  in.assign(static_cast<size_t>(floats * 4 * n), std::byte{0});
  out.assign(in.size(), std::byte{0});
  void* i = in.data();
  void* o = out.data();
  if (kind == "all_to_all")
    return {[&g, i, o, floats] { g.all_to_all(i, o, floats, DType::kF32); },
            static_cast<double>(floats * 4 * (n - 1))};
  if (kind == "all_gather")
    return {[&g, i, o, floats] { g.all_gather(i, o, floats, DType::kF32); },
            static_cast<double>(floats * 4 * (n - 1))};
  if (kind == "send_recv")
    return {[&g, i, o, floats, n] {
              g.send_recv(i, floats, (g.rank() + 1) % n, o, floats, (g.rank() - 1 + n) % n,
                          DType::kF32);
            },
            static_cast<double>(floats * 4)};
  if (kind == "all_reduce")
    return {[&g, i, floats, n] { g.all_reduce(i, floats * n, DType::kF32, dist::ReduceOp::kSum); },
            2.0 * static_cast<double>(floats * n * 4) * (n - 1) / n};
  return {[&g, i, floats, n] { g.broadcast(i, floats * n, DType::kF32, 0); },
          static_cast<double>(floats * n * 4)};
}

// Calls `measure(group, g)` for every group size g >= 2 dividing the world, with the world split
// into groups of g consecutive ranks (every group measured at once, as a mesh axis runs).
template <typename Measure>
void for_each_group_size(dist::Group& world, const char* name, Measure&& measure) {
  const int n = world.size();
  for (int g = 2; g <= n; ++g) {
    if (n % g != 0) continue;
    const std::unique_ptr<dist::Group> group =
        world.split(world.rank() / g, world.rank(), str_cat(name, g));
    measure(*group, g);
  }
}

}  // namespace

nlohmann::json measure_collective_waits(dist::Group& world, const CollectiveWaitOptions& o) {
  nlohmann::json out = nlohmann::json::array();
  if (world.size() < 2) return out;
  GemmWork gemm;
  const auto work = [&](int64_t calls) { return gemm.run(calls); };
  const double rate = work_rate(world, work);
  for_each_group_size(world, "waits", [&](dist::Group& group, int g) {
    float one = 1.0f;
    const auto reduce = [&] { group.all_reduce(&one, 1, DType::kF32, dist::ReduceOp::kSum); };
    int64_t previous_calls = 0;
    for (const double compute : o.compute_seconds) {
      const auto calls = std::max<int64_t>(1, static_cast<int64_t>(compute * rate));
      if (calls <= previous_calls) continue;  // below one GEMM's time: the same point again
      previous_calls = calls;
      const int64_t loops =
          std::max<int64_t>(4, static_cast<int64_t>(o.seconds_per_point / compute));
      const Between b = time_between(world, work, calls, loops, o.rounds, reduce);
      out.push_back({{"group", g},
                     {"compute_us", b.free * 1e6},
                     {"wait_us", std::max(0.0, b.with - b.free - b.alone) * 1e6},
                     {"free_us", b.free * 1e6},
                     {"with_collective_us", b.with * 1e6},
                     {"collective_us", b.alone * 1e6}});
    }
  });
  return out;
}

nlohmann::json measure_loaded_collectives(dist::Group& world, const LoadedOptions& o) {
  nlohmann::json out = nlohmann::json::array();
  if (world.size() < 2) return out;
  GemmWork gemm;
  const auto work = [&](int64_t calls) { return gemm.run(calls); };
  const double rate = work_rate(world, work);
  const auto calls = std::max<int64_t>(1, static_cast<int64_t>(o.compute_seconds * rate));
  std::vector<std::byte> in, outb;
  for_each_group_size(world, "loaded", [&](dist::Group& group, int g) {
    for (const char* kind : {"all_to_all", "all_gather", "send_recv", "all_reduce", "broadcast"})
      for (const int64_t per_peer : o.bytes_per_peer) {
        const Transfer t = make_transfer(group, kind, per_peer, in, outb);
        const int64_t loops =
            std::max<int64_t>(4, static_cast<int64_t>(o.seconds_per_point / o.compute_seconds));
        const Between b = time_between(world, work, calls, loops, o.rounds, t.run);
        out.push_back({{"collective", kind},
                       {"group", g},
                       {"bytes_sent_per_rank", t.bytes_sent},
                       {"compute_us", b.free * 1e6},
                       {"loaded_us", std::max(0.0, b.with - b.free) * 1e6},
                       {"idle_us", b.alone * 1e6}});
      }
  });
  return out;
}

}  // namespace vidax::cli
