// `vidax bench comm`: latency and bandwidth of every collective a mesh uses, at the message sizes
// of one Wan block (from a model preset and a video shape), plus a size sweep on the world group
// from which a latency + bytes/bandwidth (alpha-beta) fit is printed. Run it under mpirun with
// the same --mesh as the generation; prints JSON (rank 0). Also the waits at a collective between
// computing ranks (collective_waits.h), which the planner prices on this machine.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/vidax/collective_waits.h"
#include "apps/vidax/commands.h"
#include "apps/vidax/mesh_args.h"
#include "core/error.h"
#include "models/wan/dit_config.h"

namespace vidax::cli {
namespace {

struct CommArgs {
  std::string model = "wan2.1-t2v-1.3b", size = "416x240", precision = "bf16";
  int64_t frames = 17, iters = 10;
  bool waits = true;
  CollectiveWaitOptions wait_options;
  std::vector<double> waits_compute_ms = {1, 4, 16, 64, 256};
  double loaded_compute_ms = 16;
  std::optional<double> point_seconds;  // unset: each measurement's default
  MeshArgs mesh;
};

// Median seconds of `iters` runs of `op` (after one warm-up), the slowest rank's each time.
template <typename Op>
double time_collective(dist::Group& world, int64_t iters, Op&& op) {
  op();
  std::vector<double> t;
  for (int64_t i = 0; i < iters; ++i) {
    world.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    op();
    float dt = std::chrono::duration<float>(std::chrono::steady_clock::now() - t0).count();
    world.all_reduce(&dt, 1, DType::kF32, dist::ReduceOp::kMax);
    t.push_back(dt);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

nlohmann::json measure(dist::Group& world, dist::Group& g, const std::string& kind,
                       int64_t elements, DType dtype, int64_t iters) {
  const int n = g.size();
  const int64_t es = static_cast<int64_t>(dtype_size(dtype));
  // elements: what one rank sends to one peer (all_to_all), its block (all_gather), its
  // message (send_recv), or the whole vector (all_reduce, broadcast).
  std::vector<std::byte> in(static_cast<size_t>(std::max<int64_t>(1, elements * es * n)));
  std::vector<std::byte> out(in.size());
  double seconds = 0;
  int64_t bytes = 0;  // bytes this rank sends
  if (kind == "all_to_all") {
    seconds = time_collective(world, iters,
                              [&] { g.all_to_all(in.data(), out.data(), elements, dtype); });
    bytes = elements * es * (n - 1);
  } else if (kind == "all_gather") {
    seconds = time_collective(world, iters,
                              [&] { g.all_gather(in.data(), out.data(), elements, dtype); });
    bytes = elements * es * (n - 1);
  } else if (kind == "send_recv") {
    seconds = time_collective(world, iters, [&] {
      g.send_recv(in.data(), elements, (g.rank() + 1) % n, out.data(), elements,
                  (g.rank() - 1 + n) % n, dtype);
    });
    bytes = elements * es;
  } else if (kind == "all_reduce") {
    std::vector<float> v(static_cast<size_t>(std::max<int64_t>(1, elements)), 1.0f);
    seconds = time_collective(
        world, iters, [&] { g.all_reduce(v.data(), elements, DType::kF32, dist::ReduceOp::kSum); });
    bytes = 2 * elements * 4 * (n - 1) / n;
  } else {  // broadcast
    seconds = time_collective(world, iters, [&] { g.broadcast(in.data(), elements, dtype, 0); });
    bytes = g.rank() == 0 ? elements * es : 0;
  }
  return {{"collective", kind},
          {"group", g.name()},
          {"group_size", n},
          {"dtype", std::string(dtype_name(dtype))},
          {"elements", elements},
          {"bytes_sent_per_rank", bytes},
          {"seconds", seconds},
          {"gbytes_per_second", seconds > 0 ? static_cast<double>(bytes) / seconds * 1e-9 : 0.0}};
}

void bench_comm(const CommArgs& a) {
  const auto mesh = make_mesh(a.mesh);
  dist::Group& world = mesh->world();
  const auto preset = wan::dit_preset(a.model);
  if (!preset) throw_job_input_error("--model: unknown preset '", a.model, "'");
  const wan::DitConfig& c = *preset;
  const auto [width, height] = parse_size(a.size, "--size");
  if (a.frames < 1 || (a.frames - 1) % 4 != 0 || width % 16 || height % 16)
    throw_job_input_error("--frames/--size: expected 4k+1 frames and multiples of 16");
  if (a.iters < 1) throw_job_input_error("--iters: expected >= 1");
  if (a.wait_options.rounds < 1) throw_job_input_error("--waits-rounds: expected >= 1");
  if (a.point_seconds && !(*a.point_seconds > 0 && *a.point_seconds <= 60))
    throw_job_input_error("--waits-point-seconds: expected a number in (0, 60], got ",
                          *a.point_seconds);
  if (!(a.loaded_compute_ms > 0) || a.loaded_compute_ms > 10000)
    throw_job_input_error("--loaded-compute-ms: expected a number in (0, 10000]");
  double previous_ms = 0;
  for (double ms : a.waits_compute_ms) {
    if (!(ms > previous_ms) || ms > 10000)
      throw_job_input_error("--waits-compute-ms: expected increasing numbers in (0, 10000]");
    previous_ms = ms;
  }
  const int64_t lat_f = (a.frames - 1) / 4 + 1, lat_h = height / 8, lat_w = width / 8;
  const int64_t tokens = lat_f * lat_h * lat_w / c.patch_volume();
  const DType act = a.precision == "fp32" ? DType::kF32 : DType::kBF16;
  const dist::MeshSpec& m = mesh->spec();
  const int64_t lr = (tokens + m.sp() - 1) / m.sp();
  nlohmann::json block = nlohmann::json::array();
  if (m.ulysses > 1) {
    block.push_back(measure(world, mesh->ulysses(), "all_to_all", lr * 3 * c.dim / m.ulysses, act,
                            a.iters));  // q|k|v in
    block.push_back(measure(world, mesh->ulysses(), "all_to_all", lr * c.dim / m.ulysses, act,
                            a.iters));  // output back
  }
  if (m.ring > 1)
    block.push_back(measure(world, mesh->ring(), "send_recv", 2 * lr * c.dim, act, a.iters));
  if (m.sp() > 1)
    block.push_back(measure(world, mesh->sp(), "all_gather", lr * c.out_dim * c.patch_volume(),
                            DType::kF32, a.iters));
  if (m.cfg > 1)
    block.push_back(measure(world, mesh->cfg(), "all_gather", c.out_dim * lat_f * lat_h * lat_w,
                            DType::kF32, a.iters));
  // Size sweep on the world group: 8 B .. 16 MiB per peer.
  nlohmann::json sweep = nlohmann::json::array(), fit = nlohmann::json::object();
  if (world.size() > 1) {
    for (const char* kind : {"all_to_all", "all_gather", "send_recv", "all_reduce", "broadcast"}) {
      std::vector<std::pair<double, double>> pts;  // (bytes, seconds)
      for (int64_t bytes = 8; bytes <= (int64_t{16} << 20); bytes *= 8) {
        nlohmann::json r = measure(world, world, kind, bytes / 4, DType::kF32, a.iters);
        pts.emplace_back(r["bytes_sent_per_rank"].get<double>(), r["seconds"].get<double>());
        sweep.push_back(r);
      }
      // alpha = the smallest message's time; beta from the largest (bytes / (t - alpha)).
      const double alpha = pts.front().second;
      const double dt = pts.back().second - alpha;
      fit[kind] = {{"latency_seconds", alpha},
                   {"gbytes_per_second", dt > 0 ? pts.back().first / dt * 1e-9 : 0.0}};
    }
  }
  // The collectives between computing ranks (apps/vidax/collective_waits.h).
  nlohmann::json waits = nlohmann::json::array(), loaded = nlohmann::json::array();
  if (a.waits) {
    CollectiveWaitOptions wo = a.wait_options;
    wo.compute_seconds.clear();
    for (double ms : a.waits_compute_ms) wo.compute_seconds.push_back(ms * 1e-3);
    LoadedOptions lo;
    lo.compute_seconds = a.loaded_compute_ms * 1e-3;
    lo.rounds = wo.rounds;
    if (a.point_seconds) wo.seconds_per_point = lo.seconds_per_point = *a.point_seconds;
    waits = measure_collective_waits(world, wo);
    loaded = measure_loaded_collectives(world, lo);
  }
  if (!is_output_rank()) return;
  const nlohmann::json j = {{"mesh", m.str()},
                            {"ranks", world.size()},
                            {"model", a.model},
                            {"frames", a.frames},
                            {"size", a.size},
                            {"tokens", tokens},
                            {"precision", a.precision},
                            {"block_collectives", block},
                            {"sweep", sweep},
                            {"alpha_beta", fit},
                            {"collective_waits", waits},
                            {"loaded_collectives", loaded}};
  std::printf("%s\n", j.dump(2).c_str());
}

}  // namespace

void register_bench_comm(CLI::App* bench) {
  auto a = std::make_shared<CommArgs>();
  auto* cmd = bench->add_subcommand(
      "comm", "Latency and bandwidth of the mesh's collectives at Wan block sizes (JSON)");
  cmd->add_option("--model", a->model, "DiT preset giving the block sizes (default 1.3B)");
  cmd->add_option("--frames", a->frames, "video frames, 4k+1 (default 17)");
  cmd->add_option("--size", a->size, "WIDTHxHEIGHT (default 416x240)");
  cmd->add_option("--precision", a->precision, "bf16 | fp32: the activations' wire dtype");
  cmd->add_option("--iters", a->iters, "timed repetitions per point (default 10; median)");
  cmd->add_flag("!--no-waits", a->waits,
                "skip the collectives between computing ranks (collective_waits and "
                "loaded_collectives: about a minute at 4 processes)");
  cmd->add_option("--waits-compute-ms", a->waits_compute_ms,
                  "compute lengths between collectives for collective_waits (default "
                  "1,4,16,64,256)")
      ->delimiter(',');
  cmd->add_option("--loaded-compute-ms", a->loaded_compute_ms,
                  "compute between calls for loaded_collectives (default 16)");
  cmd->add_option("--waits-rounds", a->wait_options.rounds,
                  "rounds of each such measurement (default 3; medians)");
  cmd->add_option("--waits-point-seconds", a->point_seconds,
                  "timed loop length per measurement (default 0.4 for the waits, 0.3 for the "
                  "loaded collectives)");
  auto json = std::make_shared<bool>(true);
  cmd->add_flag("--json", *json, "print JSON (the only format; as the other benches' flag)");
  add_mesh_args(cmd, a->mesh);
  cmd->fallthrough();
  cmd->callback([a, json] { bench_comm(*a); });
}

}  // namespace vidax::cli
