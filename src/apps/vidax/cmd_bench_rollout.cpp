// `vidax bench rollout`: the causal rollout's DiT work (docs/rollout.md) at real model shapes with
// random weights: seconds per chunk, latent and pixel frames per second, key/value cache bytes
// and peak RSS, with the full cache or PBSA (--attention pbsa:...). The VAE is not run (its
// decode is the same streaming decode as any generation; docs/vae.md).
//   vidax bench rollout --size 416x240 --seconds 5 [--attention pbsa] [--layers 4] --json

#include <chrono>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "apps/vidax/commands.h"
#include "core/error.h"
#include "core/memory_usage.h"
#include "core/profile.h"
#include "models/wan/dit.h"
#include "models/wan/dit_config.h"
#include "models/wan/dit_random.h"
#include "pipeline/causal_rollout.h"
#include "sampling/torch_randn.h"
#include "sparse/pbsa.h"

namespace vidax::cli {
namespace {

struct BenchRolloutArgs {
  std::string model = "wan2.1-t2v-1.3b", size = "832x480", precision = "bf16";
  std::string attention = "dense";
  double seconds = 5, fps = 16;
  int64_t layers = 0, chunks = 0, context_tokens = 32;
  bool json = false;
};

void bench_rollout(const BenchRolloutArgs& a) {
  auto preset = wan::dit_preset(a.model);
  if (!preset) throw_input_error("--model: unknown DiT preset '", a.model, "'");
  wan::DitConfig cfg = *preset;
  if (a.layers < 0 || a.layers > 1000) throw_input_error("--layers: expected 1..1000");
  if (a.layers > 0) cfg.num_layers = a.layers;
  const auto [width, height] = parse_size(a.size, "--size");
  const wan::Precision p = wan::parse_precision(a.precision, "--precision");
  RolloutOptions ro;
  if (sparse::is_pbsa_spec(a.attention)) {
    ro.pbsa = sparse::parse_pbsa_spec(a.attention);
  } else if (a.attention != "dense") {
    throw_input_error("--attention: dense or pbsa[:...] for a rollout, got '", a.attention, "'");
  }
  if (!(a.seconds > 0)) throw_input_error("--seconds: expected > 0");
  const int64_t per_chunk = 4 * ro.chunk_frames;
  const auto chunks = static_cast<int64_t>(std::ceil((a.seconds * a.fps + 3.0) / per_chunk - 1e-9));
  const int64_t frames = ro.chunk_frames * chunks, lat_h = height / 8, lat_w = width / 8;
  if (lat_h % cfg.patch[1] != 0 || lat_w % cfg.patch[2] != 0)
    throw_input_error("--size: latent ", lat_w, "x", lat_h, " is not divisible by the patch");
  const int64_t run_chunks = a.chunks > 0 ? std::min(a.chunks, chunks) : chunks;

  const auto t_load = std::chrono::steady_clock::now();
  wan::WanDit dit(
      cfg,
      wan::random_dit_weights(cfg, p == wan::Precision::kBF16 ? DType::kBF16 : DType::kF32, 1234),
      p);
  const double load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
  const Tensor context = torch_randn(7, Shape{a.context_tokens, cfg.text_dim});
  CausalRollout r(dit, context, Shape{cfg.out_dim, frames, lat_h, lat_w}, ro);
  std::vector<double> chunk_seconds;
  // The self-attention over the cache (PBSA's saliency and mask included) is timed apart.
  profile::set_enabled(true);
  profile::reset();
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t c = 0; c < run_chunks; ++c) {
    const auto tc = std::chrono::steady_clock::now();
    (void)r.step();
    chunk_seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - tc).count());
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double per = total / static_cast<double>(run_chunks);
  double attention_seconds = 0;
  for (const auto& [name, v] : profile::snapshot())
    if (name == "attention.kv_cache") attention_seconds = v.first;
  const double latent_fps = static_cast<double>(ro.chunk_frames) / per;
  const double pixel_fps = 4.0 * latent_fps;  // 4 pixel frames per latent frame after the first
  const RolloutPlan& plan = r.plan();
  if (a.json) {
    nlohmann::json j = {
        {"model", a.model},
        {"layers", cfg.num_layers},
        {"size", {width, height}},
        {"precision", a.precision},
        {"attention", ro.pbsa ? ro.pbsa->spec() : "dense"},
        {"seconds", a.seconds},
        {"chunks", chunks},
        {"chunks_run", run_chunks},
        {"frame_tokens", plan.frame_tokens},
        {"cache", plan.rolling ? "rolling" : "global"},
        {"cache_frames", plan.cache_frames},
        {"persistent_tokens", plan.persistent_tokens},
        {"kv_cache_bytes", r.cache().bytes()},
        {"seconds_per_chunk", per},
        {"attention_seconds_per_chunk", attention_seconds / static_cast<double>(run_chunks)},
        {"chunk_seconds", chunk_seconds},
        {"latent_frames_per_second", latent_fps},
        {"pixel_frames_per_second", pixel_fps},
        {"load_seconds", load_seconds},
        {"dit_weight_bytes", dit.weight_bytes()},
        {"peak_rss_bytes", static_cast<double>(peak_resident_bytes())}};
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("rollout %s (%lld layers) %lldx%lld %s, %s: %lld of %lld chunks\n", a.model.c_str(),
              static_cast<long long>(cfg.num_layers), static_cast<long long>(width),
              static_cast<long long>(height), a.precision.c_str(),
              ro.pbsa ? ro.pbsa->spec().c_str() : "dense", static_cast<long long>(run_chunks),
              static_cast<long long>(chunks));
  std::printf(
      "  %.3f s/chunk (self-attention over the cache %.3f s), %.2f latent frames/s "
      "(%.2f pixel frames/s)\n",
      per, attention_seconds / static_cast<double>(run_chunks), latent_fps, pixel_fps);
  std::printf("  kv cache %.1f MiB (%s, %lld frames + %lld persistent rows), peak RSS %.1f MiB\n",
              r.cache().bytes() / (1 << 20), plan.rolling ? "rolling" : "global",
              static_cast<long long>(plan.cache_frames),
              static_cast<long long>(plan.persistent_tokens),
              static_cast<double>(peak_resident_bytes()) / (1 << 20));
}

}  // namespace

void register_bench_rollout(CLI::App* bench) {
  auto a = std::make_shared<BenchRolloutArgs>();
  auto* cmd = bench->add_subcommand(
      "rollout", "Time a causal rollout's DiT work at real shapes (random weights)");
  cmd->add_option("--model", a->model, "DiT preset (default wan2.1-t2v-1.3b)");
  cmd->add_option("--layers", a->layers, "override the preset's block count (0: the preset's)");
  cmd->add_option("--size", a->size, "WIDTHxHEIGHT (default 832x480)");
  cmd->add_option("--seconds", a->seconds, "video length in seconds at --fps (default 5)");
  cmd->add_option("--fps", a->fps, "frames per second (default 16)");
  cmd->add_option("--chunks", a->chunks,
                  "run only the first N chunks of that video (0: all; the cache is sized for all)");
  cmd->add_option("--attention", a->attention, "dense | pbsa[:window=..,persist=..,density=..]");
  cmd->add_option("--precision", a->precision, "bf16 | fp32 (default bf16)");
  cmd->add_option("--context-tokens", a->context_tokens, "prompt tokens (default 32)");
  cmd->add_flag("--json", a->json, "print one JSON object");
  cmd->fallthrough();
  cmd->callback([=] { bench_rollout(*a); });
}

}  // namespace vidax::cli
