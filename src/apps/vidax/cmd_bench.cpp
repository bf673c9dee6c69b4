// `vidax bench dit`: time the DiT forward at a model's real shapes with random (or given)
// weights; `vidax bench peak`: the machine's f32 FMA and bf16 dot-product peak.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <omp.h>
#include <nlohmann/json.hpp>

#include "apps/vidax/commands.h"
#include "apps/vidax/mesh_args.h"
#include "apps/vidax/weight_args.h"
#include "core/byte_size.h"
#include "core/memory_usage.h"
#include "core/profile.h"
#include "dist/tensor_collectives.h"
#include "kernels/cpu/peak.h"
#include "models/wan/dit.h"
#include "models/wan/dit_checkpoint.h"
#include "models/wan/dit_comm_model.h"
#include "models/wan/dit_random.h"
#include "models/wan/dit_tensors.h"
#include "pipeline/denoise.h"
#include "sampling/torch_randn.h"

namespace vidax::cli {
namespace {

struct BenchArgs {
  std::string model = "wan2.1-t2v-1.3b", weights, size = "416x240", precision = "bf16";
  WeightArgs residency;
  int64_t frames = 17, context_tokens = 512, iters = 2, warmup = 1, timestep = 500;
  int64_t layers = 0;  // --layers: the preset's block count overridden (0: the preset's)
  bool json = false, no_peak = false, profile = false, guided = false;
  MeshArgs mesh;
};

// A preset's random weights written to a file (bf16 or f32) for the streamed path, which reads
// a checkpoint; removed when the benchmark ends. Under a mesh rank 0 writes it and every rank
// reads it.
struct TemporaryWeights {
  TemporaryWeights(const dist::Mesh& mesh, const std::string& model, const wan::DitConfig& cfg,
                   DType dtype)
      : mesh(mesh) {
    const uint64_t id = dist::broadcast_u64(mesh.world(), static_cast<uint64_t>(getpid()), 0);
    const char* tmp = std::getenv("TMPDIR");
    path = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/vidax_bench_" + model +
           "_" + std::string(dtype_name(dtype)) + "_" + std::to_string(id) + ".safetensors";
    owner = mesh.world().rank() == 0;
    if (owner) wan::write_random_dit_checkpoint(path, cfg, dtype, 1234);
    mesh.world().barrier();
  }
  ~TemporaryWeights() {
    if (owner) std::remove(path.c_str());
  }
  const dist::Mesh& mesh;
  std::string path;
  bool owner = false;
};

void bench_dit(const BenchArgs& a) {
  const auto mesh = make_mesh(a.mesh);
  const bool guided = a.guided || mesh->spec().cfg > 1;
  const bool out_rank = is_output_rank();
  const wan::Precision p = wan::parse_precision(a.precision, "--precision");
  const auto [width, height] = parse_size(a.size, "--size");
  if (width % 16 != 0 || height % 16 != 0)
    throw_input_error("--size: ", a.size, " must be multiples of 16 (VAE stride 8 x patch 2); try ",
                      (width + 8) / 16 * 16, "x", (height + 8) / 16 * 16);
  if (a.frames < 1 || (a.frames - 1) % 4 != 0)
    throw_input_error("--frames: ", a.frames, " must be 4k+1 (VAE temporal stride 4); try ",
                      (a.frames - 1) / 4 * 4 + 1, " or ", (a.frames - 1) / 4 * 4 + 5);
  if (a.iters < 1 || a.warmup < 0) throw_input_error("--iters must be >= 1 and --warmup >= 0");
  if (a.context_tokens < 0)
    throw_input_error("--context-tokens: expected >= 0, got ", a.context_tokens);

  const int64_t budget = a.residency.budget_bytes();
  const bool keep_fp8 = a.residency.keep_fp8;
  const bool keep_fp16 = a.residency.keep_fp16;
  if (keep_fp8 && keep_fp16 && a.weights.empty())  // (a preset is written in one dtype)
    throw_input_error("--keep-fp8 and --keep-fp16 with --model: choose one");
  wan::check_keep_fp16(keep_fp16, p);
  const bool sharded = a.residency.sharded();
  const bool streamed = budget > 0;

  const auto t_load = std::chrono::steady_clock::now();
  std::shared_ptr<const wan::DitCheckpoint> ck;
  wan::DitConfig cfg;
  wan::WeightFn weights;
  std::unique_ptr<TemporaryWeights> temporary;  // a preset's random weights, written to stream
  std::string weights_path = a.weights;
  if (weights_path.empty()) {
    auto preset = wan::dit_preset(a.model);
    if (!preset) {
      std::string names;
      for (const auto& n : wan::dit_preset_names()) names += (names.empty() ? "" : ", ") + n;
      throw_input_error("--model: unknown model '", a.model, "' (expected one of ", names, ")");
    }
    cfg = *preset;
    if (a.layers < 0 || a.layers > 1000) throw_input_error("--layers: expected 1..1000");
    if (a.layers > 0) cfg.num_layers = a.layers;
    const DType dtype = keep_fp8                     ? DType::kF8E4M3
                        : keep_fp16                  ? DType::kF16
                        : p == wan::Precision::kBF16 ? DType::kBF16
                                                     : DType::kF32;
    if (streamed || keep_fp8 || keep_fp16) {  // they read a file: write the weights first
      temporary = std::make_unique<TemporaryWeights>(*mesh, a.model, cfg, dtype);
      weights_path = temporary->path;
    } else {
      weights = wan::random_dit_weights(cfg, dtype, 1234);
    }
  }
  if (!weights_path.empty()) {
    ck = std::make_shared<const wan::DitCheckpoint>(wan::DitCheckpoint::open(weights_path));
    ck->require_loadable();
    cfg = ck->config();
  }
  const int64_t lat_f = (a.frames - 1) / 4 + 1, lat_h = height / 8, lat_w = width / 8;
  if (lat_h % cfg.patch[1] != 0 || lat_w % cfg.patch[2] != 0)
    throw_input_error("--size: latent ", lat_w, "x", lat_h, " is not divisible by the patch");
  {  // Refuse impossible sizes before spending time on the weights.
    const int64_t tokens = lat_f * lat_h * lat_w / cfg.patch_volume();
    double weight_need = static_cast<double>(wan::dit_parameter_count(cfg)) *
                         (keep_fp8                                  ? 1.0
                          : keep_fp16 || p == wan::Precision::kBF16 ? 2.0
                                                                    : 4.0) /
                         mesh->spec().tp;
    if (streamed) weight_need = std::min(weight_need, static_cast<double>(budget));
    if (sharded) weight_need /= std::max(1, mesh->world().size() / mesh->spec().tp);
    const double need = wan::WanDit::activation_bytes(cfg, tokens) + weight_need;
    const double have =
        static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
    if (have > 0 && need > have)
      throw_input_error("--frames/--size: ", a.frames, " frames at ", a.size, " (", tokens,
                        " tokens) need ~", need / (1 << 30), " GiB; this machine has ",
                        have / (1 << 30), " GiB");
  }
  check_mesh_for_model(*mesh, cfg.num_heads, true);
  ExecContext ctx = cli_context();
  ctx.mesh = mesh.get();
  wan::WeightResidency residency;  // random weights in memory: sharded as a file's would be
  if (!ck && sharded) residency.shard_group = wan::weight_shard_group(ctx);
  wan::WanDit model = ck ? wan::open_dit(ck, p, ctx, budget, keep_fp8, sharded, keep_fp16)
                         : wan::WanDit(cfg, weights, p, ctx, residency);
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();

  wan::DitSample s;
  // i2v: noise of out_dim channels, y (mask + image latents) the rest of in_dim.
  const int64_t y_channels = cfg.kind == wan::DitKind::kI2V ? cfg.in_dim - cfg.out_dim : 0;
  s.x = torch_randn(1, Shape{cfg.in_dim - y_channels, lat_f, lat_h, lat_w});
  if (y_channels > 0) s.y = torch_randn(2, Shape{y_channels, lat_f, lat_h, lat_w});
  if (cfg.image_branch()) s.clip_fea = torch_randn(3, Shape{1, 257, cfg.clip_dim});
  s.context = torch_randn(4, Shape{std::min(a.context_tokens, cfg.text_len), cfg.text_dim});
  s.t = Tensor::from_floats(std::vector<float>{static_cast<float>(a.timestep)}, Shape{1});
  const int64_t tokens = lat_f * lat_h * lat_w / cfg.patch_volume();

  // One timed unit: a forward, or with --guided a guided step (the conditional and the
  // unconditional forward: both in one process, one per rank under cfg=2, whose predictions are
  // then exchanged).
  dist::Group& cfg_group = mesh->cfg();
  // (the denoising loop's own guided_prediction; both branches get the same context here)
  auto unit = [&] {
    if (guided) {
      guided_prediction(model, s, s.context, s.context, 5.0, &cfg_group);
    } else {
      model.forward(s);
    }
  };
  for (int64_t i = 0; i < a.warmup; ++i) unit();
  const wan::WeightStreamStats stream_before = model.weight_stream_stats();
  profile::set_enabled(a.profile);
  mesh->world().barrier();
  dist::CommStats comm;  // the units' collectives only (not the timing's barrier and maximum)
  double total = 0, best = 1e30;
  for (int64_t i = 0; i < a.iters; ++i) {
    mesh->world().barrier();  // every rank starts the unit together; the slowest rank counts
    mesh->reset_stats();
    const auto t0 = std::chrono::steady_clock::now();
    unit();
    comm.add(mesh->stats());
    float slowest = std::chrono::duration<float>(std::chrono::steady_clock::now() - t0).count();
    mesh->world().all_reduce(&slowest, 1, DType::kF32, dist::ReduceOp::kMax);
    const double dt = slowest;
    total += dt;
    best = std::min(best, dt);
  }
  profile::set_enabled(false);
  const double seconds = total / static_cast<double>(a.iters);   // per unit
  const double flops = wan::WanDit::forward_flops(cfg, tokens);  // one whole forward
  // Per rank: its share of the unit's work over the unit's time.
  const double gflops = flops * (guided ? 2.0 : 1.0) / mesh->world().size() / seconds * 1e-9;
  PeakFlops peak;
  if (!a.no_peak && mesh->world().size() == 1) peak = measure_peak_flops();
  // The bf16 reference is the fastest bf16 unit the machine has: AMX tiles where present (what
  // oneDNN's bf16 GEMMs run on), else AVX512_BF16 dot products.
  // bf16 runs on the machine's fastest bf16 route: AMX tiles, else bf16 values widened to f32
  // (kernels/cpu/gemm.h), so its reference is the larger of the three peaks.
  const double bf16_peak = std::max({peak.bf16_gflops, peak.amx_bf16_gflops, peak.f32_gflops});
  const double peak_ref = p == wan::Precision::kBF16 ? bf16_peak : peak.f32_gflops;
  nlohmann::json j = {{"model", a.weights.empty() ? a.model : a.weights},
                      {"layers", cfg.num_layers},
                      {"precision", a.precision},
                      {"frames", a.frames},
                      {"size", a.size},
                      {"tokens", tokens},
                      {"threads", omp_get_max_threads()},
                      {"iters", a.iters},
                      // A guided step is two forwards: its time / 2 is per forward.
                      {"seconds_per_forward", guided ? seconds / 2 : seconds},
                      {"best_seconds", best},
                      {"load_seconds", load_s},
                      {"flops_per_forward", flops},
                      {"gflops_per_second", gflops},
                      {"peak_gflops", peak_ref},
                      {"peak_fraction", peak_ref > 0 ? gflops / peak_ref : 0.0},
                      {"peak_avx512_bf16_gflops", peak.bf16_gflops},
                      {"peak_amx_bf16_gflops", peak.amx_bf16_gflops},
                      {"peak_f32_gflops", peak.f32_gflops},
                      {"weight_bytes", model.weight_bytes()},
                      {"peak_rss_bytes", peak_resident_bytes()},
                      {"keep_fp8", keep_fp8},
                      {"keep_fp16", keep_fp16},
                      {"guided", guided},
                      {"mesh", mesh->spec().str()},
                      {"ranks", mesh->world().size()}};
  if (guided) j["seconds_per_step"] = seconds;
  j["weights"] = sharded ? "sharded" : "resident";
  if (streamed || sharded) {
    // Per timed unit: block loads (sharded: gathers), the loader thread's time and the time
    // forward() waited for it (the weights' share of the unit's time).
    const wan::WeightStreamStats st = model.weight_stream_stats();
    const double n = static_cast<double>(a.iters);
    const double wait = (st.wait_seconds - stream_before.wait_seconds) / n;
    j["weights_budget_bytes"] = budget;
    j["weight_stream"] = {
        {"pinned_blocks", st.pinned_blocks},
        {"streamed_blocks", st.streamed_blocks},
        {"window", st.window},
        {"loads_per_unit", static_cast<double>(st.loads - stream_before.loads) / n},
        {"uses_per_unit", static_cast<double>(st.uses - stream_before.uses) / n},
        {"load_seconds_per_unit", (st.load_seconds - stream_before.load_seconds) / n},
        {"wait_seconds_per_unit", wait},
        {"wait_fraction", seconds > 0 ? wait / seconds : 0.0}};
  }
  if (mesh->world().size() > 1) j["gflops_per_second_per_rank"] = gflops;
  if (mesh->world().size() > 1) {
    // Per timed unit, this rank (rank 0; the mesh is symmetric): measured and modelled bytes.
    const wan::DitCommBytes model_bytes =
        wan::dit_comm_bytes(cfg, tokens, mesh->spec(), p, s.x.numel(), s.context.dim(0));
    const double forwards_per_unit = guided && cfg_group.size() == 1 ? 2.0 : 1.0;
    nlohmann::json kinds = nlohmann::json::object();
    for (int k = 0; k < static_cast<int>(dist::CollectiveKind::kCount); ++k) {
      const size_t i = static_cast<size_t>(k);
      if (comm.calls[i] == 0) continue;
      const double n = static_cast<double>(a.iters);
      kinds[dist::collective_name(static_cast<dist::CollectiveKind>(k))] = {
          {"calls", static_cast<double>(comm.calls[i]) / n},
          {"bytes_sent", static_cast<double>(comm.bytes_sent[i]) / n},
          {"seconds", comm.seconds[i] / n}};
    }
    j["comm_measured"] = kinds;
    // The cross-attention keys of the one context are computed (and their norm statistics
    // reduced over tp) in the first unit, which is timed when there is no warm-up.
    const double context_once = a.warmup == 0 ? model_bytes.tp_context / a.iters : 0.0;
    j["comm_model_bytes"] = {
        {"all_to_all", model_bytes.ulysses * forwards_per_unit},
        {"all_reduce", model_bytes.tp_reduce * forwards_per_unit + context_once},
        {"send_recv", model_bytes.ring * forwards_per_unit},
        {"all_gather",
         model_bytes.sp_gather * forwards_per_unit + (guided ? model_bytes.cfg_gather : 0.0)}};
  }
  nlohmann::json phases = nlohmann::json::object();
  for (const auto& [name, v] : profile::snapshot())
    phases[name] = v.first / static_cast<double>(a.iters);
  if (a.profile) j["seconds_per_forward_by_phase"] = phases;
  if (!out_rank) return;
  if (a.json) {
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("model %s, %s, %lld frames at %s -> %lld tokens, %d threads\n",
              j["model"].get<std::string>().c_str(), a.precision.c_str(),
              static_cast<long long>(a.frames), a.size.c_str(), static_cast<long long>(tokens),
              omp_get_max_threads());
  std::printf("seconds per %s: %.3f (best %.3f, %lld iters after %lld warm-up)%s%s\n",
              guided ? "guided step (2 forwards)" : "forward", seconds, best,
              static_cast<long long>(a.iters), static_cast<long long>(a.warmup),
              mesh->world().size() > 1 ? ", mesh " : "",
              mesh->world().size() > 1 ? mesh->spec().str().c_str() : "");
  if (j.contains("comm_measured"))
    for (const auto& [kind, v] : j["comm_measured"].items())
      std::printf("  %-14s %6.0f calls  %10.3f MiB sent  %8.4f s\n", kind.c_str(),
                  v["calls"].get<double>(), v["bytes_sent"].get<double>() / (1 << 20),
                  v["seconds"].get<double>());
  std::printf("work: %.1f GFLOP per forward -> %.1f GFLOP/s", flops * 1e-9, gflops);
  if (peak_ref > 0)
    std::printf(" = %.0f%% of the measured %s peak (%.0f GFLOP/s)", 100 * gflops / peak_ref,
                a.precision.c_str(), peak_ref);
  std::printf("\nweights: %.2f GiB packed; peak RSS %.2f GiB; load %.1f s\n",
              static_cast<double>(model.weight_bytes()) / (1 << 30),
              static_cast<double>(peak_resident_bytes()) / (1 << 30), load_s);
  if (streamed) {
    const auto& w = j["weight_stream"];
    std::printf(
        "weights budget %s: %d blocks kept, %d streamed (window %d); per %s %.1f loads, "
        "%.2f s loading, %.2f s waited (%.0f%% of the time)\n",
        format_bytes(static_cast<double>(budget)).c_str(), w["pinned_blocks"].get<int>(),
        w["streamed_blocks"].get<int>(), w["window"].get<int>(), guided ? "step" : "forward",
        w["loads_per_unit"].get<double>(), w["load_seconds_per_unit"].get<double>(),
        w["wait_seconds_per_unit"].get<double>(), 100 * w["wait_fraction"].get<double>());
  }
  if (a.profile) {
    std::printf("per forward, by phase:\n");
    for (const auto& [name, v] : profile::snapshot())
      std::printf("  %-16s %8.3f s  %5.1f%%\n", name.c_str(),
                  v.first / static_cast<double>(a.iters), 100.0 * v.first / total);
  }
}

}  // namespace

void register_bench(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  bench->fallthrough();
  register_bench_vae(bench);
  register_bench_accel(bench);
  register_bench_attention(bench);
  register_bench_comm(bench);
  register_bench_rollout(bench);
  {
    auto* cmd = bench->add_subcommand("dit", "Time DiT forward passes at real model shapes");
    auto a = std::make_shared<BenchArgs>();
    cmd->add_option("--model", a->model, "preset with random weights (default wan2.1-t2v-1.3b)");
    cmd->add_option("--weights", a->weights, "use a checkpoint instead of random weights");
    cmd->add_option("--layers", a->layers,
                    "with --model: this many blocks of the preset's size (default: all)");
    add_weight_args(cmd, a->residency,
                    "; with --model the preset's random weights are first written to a "
                    "temporary file in $TMPDIR (as a scaled-fp8 file with --keep-fp8)");
    cmd->add_option("--frames", a->frames, "video frames, 4k+1 (default 17)");
    cmd->add_option("--size", a->size, "WIDTHxHEIGHT in pixels (default 416x240)");
    cmd->add_option("--precision", a->precision, "fp32 | bf16 (default bf16)");
    cmd->add_option("--context-tokens", a->context_tokens,
                    "text tokens before padding (default 512)");
    cmd->add_option("--iters", a->iters, "timed forward passes (default 2)");
    cmd->add_option("--warmup", a->warmup, "untimed warm-up passes (default 1)");
    cmd->add_flag("--json", a->json, "print one JSON object");
    cmd->add_flag("--no-peak", a->no_peak, "skip the peak measurement");
    cmd->add_flag("--profile", a->profile,
                  "time each phase of the forward (GEMMs, attention, ...)");
    cmd->add_flag("--guided", a->guided,
                  "time guided steps (conditional + unconditional forward; implied by --mesh "
                  "cfg=2)");
    add_mesh_args(cmd, a->mesh);
    cmd->fallthrough();
    cmd->callback([=] { bench_dit(*a); });
  }
  {
    auto* cmd = bench->add_subcommand("peak", "Measure f32 FMA and bf16 dot-product peak GFLOP/s");
    auto json = std::make_shared<bool>(false);
    cmd->add_flag("--json", *json, "print one JSON object");
    cmd->fallthrough();
    cmd->callback([=] {
      const PeakFlops p = measure_peak_flops(0.5);
      if (*json) {
        nlohmann::json j = {{"threads", p.threads},
                            {"f32_gflops", p.f32_gflops},
                            {"bf16_gflops", p.bf16_gflops},
                            {"amx_bf16_gflops", p.amx_bf16_gflops}};
        std::printf("%s\n", j.dump().c_str());
      } else {
        std::printf(
            "threads %d\nf32 FMA peak:         %8.1f GFLOP/s (%s)\nbf16 dot-product peak: %7.1f "
            "GFLOP/s (%s)\n",
            p.threads, p.f32_gflops, p.f32_isa, p.bf16_gflops, p.bf16_isa);
        if (p.amx_bf16_gflops > 0)
          std::printf("AMX bf16 tile peak:    %8.1f GFLOP/s (%s)\n", p.amx_bf16_gflops, p.amx_isa);
      }
    });
  }
  register_bench_t5(*bench);
}

}  // namespace vidax::cli
