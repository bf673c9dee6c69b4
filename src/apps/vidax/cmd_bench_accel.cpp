// `vidax bench accel`: the denoising loop at a real model's shapes with random weights, dense and
// with each step method in the same process, one after another: seconds, the wall-clock fraction
// against the dense loop, the work fraction the method reports, and their difference (the
// method's overhead). Random weights give a random trajectory, so skip decisions are not those of
// a trained model; the table compares each method's time with the work it did.
#include <chrono>
#include <cstdio>

#include <omp.h>
#include <nlohmann/json.hpp>

#include "accel/step_method.h"
#include "apps/vidax/commands.h"
#include "models/wan/dit_random.h"
#include "pipeline/denoise.h"
#include "sampling/torch_randn.h"

namespace vidax::cli {
namespace {

struct BenchAccelArgs {
  std::string model = "wan2.1-t2v-1.3b", precision = "bf16", size = "256x256", sampler = "unipc";
  std::vector<std::string> accel;
  int64_t frames = 9, steps = 20, context_tokens = 32;
  bool json = false;
};

struct Row {
  std::string spec;
  double seconds = 0, work_fraction = 1;
  int64_t model_calls = 0, block_stack_runs = 0;
};

void bench_accel(const BenchAccelArgs& a) {
  const auto preset = wan::dit_preset(a.model);
  if (!preset) {
    std::string names;
    for (const auto& n : wan::dit_preset_names()) names += (names.empty() ? "" : ", ") + n;
    throw_input_error("--model: unknown preset '", a.model, "' (expected one of ", names, ")");
  }
  if (preset->kind != wan::DitKind::kT2V)
    throw_input_error("--model ", a.model, ": bench accel runs text-to-video presets");
  const wan::DitConfig cfg = *preset;
  const auto [width, height] = parse_size(a.size, "--size");
  if (width % 16 != 0 || height % 16 != 0)
    throw_input_error("--size: ", a.size, " must be multiples of 16");
  if (a.frames < 1 || (a.frames - 1) % 4 != 0)
    throw_input_error("--frames: expected 4k+1, got ", a.frames);
  if (a.steps < 1 || a.steps > 1000) throw_input_error("--steps: expected 1..1000, got ", a.steps);
  if (a.context_tokens < 1 || a.context_tokens > cfg.text_len)
    throw_input_error("--context-tokens: expected 1..", cfg.text_len, ", got ", a.context_tokens);
  const wan::Precision p = wan::parse_precision(a.precision, "--precision");
  const int64_t lat_f = (a.frames - 1) / 4 + 1, lat_h = height / 8, lat_w = width / 8;

  accel::RunInfo run;
  run.dit = cfg;
  run.steps = static_cast<int>(a.steps);
  run.branches = 2;
  run.width = width;
  run.height = height;
  run.tokens = lat_f * lat_h * lat_w / cfg.patch_volume();
  run.sampler = a.sampler;
  run.latent = {lat_f, lat_h, lat_w};
  run.seed = 1;
  // Every spec is checked before minutes of work.
  for (const auto& spec : a.accel) (void)accel::make_step_method(spec, run);

  wan::WanDit model(
      cfg,
      wan::random_dit_weights(cfg, p == wan::Precision::kBF16 ? DType::kBF16 : DType::kF32, 1234),
      p, cli_context());
  const Tensor noise = torch_randn(1, Shape{cfg.in_dim, lat_f, lat_h, lat_w});
  const Tensor context = torch_randn(2, Shape{a.context_tokens, cfg.text_dim});
  const Tensor context_null = torch_randn(3, Shape{a.context_tokens, cfg.text_dim});
  DenoiseOptions opt;
  opt.steps = static_cast<int>(a.steps);
  opt.sampler = a.sampler;

  std::vector<Row> rows;
  std::vector<std::string> specs = {"none"};
  specs.insert(specs.end(), a.accel.begin(), a.accel.end());
  for (const std::string& spec : specs) {
    const auto method = accel::make_step_method(spec, run);
    opt.accel = method.get();
    const auto t0 = std::chrono::steady_clock::now();
    denoise(model, noise, context, context_null, 0, opt);
    Row r;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (method) {
      const accel::StepReport rep = method->report();
      r.spec = rep.spec;
      r.work_fraction = rep.work_fraction;
      r.model_calls = rep.model_calls;
      r.block_stack_runs = rep.block_stack_runs;
    } else {
      r.spec = "none";
      r.model_calls = r.block_stack_runs = 2 * a.steps;
    }
    rows.push_back(r);
  }
  const double dense = rows.front().seconds;
  nlohmann::json j = {{"model", a.model + " (random weights)"},
                      {"precision", a.precision},
                      {"size", a.size},
                      {"frames", a.frames},
                      {"tokens", run.tokens},
                      {"steps", a.steps},
                      {"threads", omp_get_max_threads()},
                      {"rows", nlohmann::json::array()}};
  for (const Row& r : rows)
    j["rows"].push_back({{"spec", r.spec},
                         {"seconds", r.seconds},
                         {"wall_fraction", r.seconds / dense},
                         {"work_fraction", r.work_fraction},
                         {"model_calls", r.model_calls},
                         {"block_stack_runs", r.block_stack_runs}});
  if (a.json) {
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("%s (random weights), %s, %s x %lld frames (%lld tokens), %lld steps, %d threads\n",
              a.model.c_str(), a.precision.c_str(), a.size.c_str(),
              static_cast<long long>(a.frames), static_cast<long long>(run.tokens),
              static_cast<long long>(a.steps), omp_get_max_threads());
  std::printf("%-58s %9s %6s %6s %9s %7s\n", "method", "seconds", "wall", "work", "overhead",
              "blocks");
  for (const Row& r : rows)
    std::printf("%-58s %9.2f %5.1f%% %5.1f%% %8.1f%% %3lld/%lld\n", r.spec.c_str(), r.seconds,
                100 * r.seconds / dense, 100 * r.work_fraction,
                100 * (r.seconds / dense - r.work_fraction),
                static_cast<long long>(r.block_stack_runs), static_cast<long long>(2 * a.steps));
}

}  // namespace

void register_bench_accel(CLI::App* bench) {
  auto a = std::make_shared<BenchAccelArgs>();
  auto* cmd = bench->add_subcommand(
      "accel", "Time the denoising loop dense and with step methods (random weights)");
  cmd->add_option("--model", a->model, "DiT preset (default wan2.1-t2v-1.3b)");
  cmd->add_option("--accel", a->accel,
                  "a step-method spec to time after the dense loop (repeat for several)")
      ->required();
  cmd->add_option("--size", a->size, "WIDTHxHEIGHT (default 256x256)");
  cmd->add_option("--frames", a->frames, "frames, 4k+1 (default 9)");
  cmd->add_option("--steps", a->steps, "denoising steps (default 20)");
  cmd->add_option("--precision", a->precision, "bf16 | fp32 (default bf16)");
  cmd->add_option("--sampler", a->sampler, "unipc | dpm++ | euler (default unipc; hsa: euler)");
  cmd->add_option("--context-tokens", a->context_tokens, "prompt tokens (default 32)");
  cmd->add_flag("--json", a->json, "print one JSON object");
  cmd->fallthrough();
  cmd->callback([=] { bench_accel(*a); });
}

}  // namespace vidax::cli
