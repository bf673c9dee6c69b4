// `vidax generate`: text to video with a Wan T2V model, as the official pipeline does it.
//   vidax generate --model DIR --prompt "..." -o out.mp4
//   vidax generate --dit F --t5 F --vae F --tokenizer F --prompt "..." -o out.mp4
//   vidax generate --model DIR --prompts prompts.txt -o out.mp4   (out_001.mp4, out_002.mp4...)
// `--dry-run` prints the plan (files, configs, tokens, memory per phase) and loads nothing.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <optional>
#include <random>

#include "apps/vidax/commands.h"
#include "apps/vidax/mesh_args.h"
#include "apps/vidax/weight_args.h"
#include "core/error.h"
#include "dist/tensor_collectives.h"
#include "dist/world.h"
#include "io/prompt_file.h"
#include "io/temp_paths.h"
#include "pipeline/text_to_video.h"
#include "plan/plan_file.h"
#include "sampling/scheduler.h"

namespace vidax::cli {
namespace {

struct GenerateArgs {
  std::string model, dit, dit_low, t5, vae, tokenizer, clip, image, last_image;
  std::string prompt, prompts_file, negative_prompt, size = "832x480", sampler = "unipc",
                                                     precision = "bf16", vae_precision;
  std::string output = "out.mp4", attention = "dense", accel = "none";
  WeightArgs residency;
  bool negative_given = false, size_given = false, frames_given = false, fps_given = false;
  bool steps_given = false, shift_given = false, guide_given = false;
  int64_t frames = 81, steps = 50, seed = -1, vae_tile = 0, crf = -1;
  double shift = 5.0, guide_scale = 5.0, fps = 16;
  bool dry_run = false, progress = false, no_hash = false, json = false;
  MeshArgs mesh;
  std::string plan_file;  // --plan: a topology plan (vidax plan -o)
  // --rollout (docs/rollout.md)
  bool rollout = false, force_causal = false, no_warp = false;
  int64_t chunk_frames = 3, local_attn_size = -1, sink_size = -1;
  std::string rollout_steps = "1000,750,500,250";
  double rollout_shift = 5.0, seconds = 0;
  bool seconds_given = false;
};

// "1000,750,500,250" -> {1000, 750, 500, 250}.
std::vector<double> parse_step_list(const std::string& text, const std::string& flag) {
  std::vector<double> out;
  size_t i = 0;
  while (i <= text.size()) {
    const size_t j = text.find(',', i);
    const std::string item = text.substr(i, j == std::string::npos ? std::string::npos : j - i);
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size())
      throw_input_error(flag, ": '", item,
                        "' is not a number (expected a list like 1000,750,500,250)");
    out.push_back(v);
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return out;
}

// --plan: the plan's mesh, weight mode, size and frames become this run's (a flag that says
// otherwise is an error naming both). Returns the plan.
plan::PlanFile apply_topology_plan(GenerateArgs& a) {
  plan::PlanFile p = plan::read_plan_file(a.plan_file);
  const int world_size = dist::world().size();
  if (world_size != p.devices)
    throw_job_input_error("--plan: ", a.plan_file, " is for ", p.devices,
                          " processes; this job has ", world_size, " (mpirun -n ", p.devices, ")");
  const std::string planned = p.mesh.str();
  if (!a.mesh.spec.empty() && dist::parse_mesh_spec(a.mesh.spec).str() != planned)
    throw_job_input_error("--plan: the plan's mesh is ", planned, "; --mesh says ", a.mesh.spec);
  a.mesh.spec = planned;
  if (!a.residency.mode.empty() && a.residency.mode != p.weights)
    throw_job_input_error("--plan: the plan keeps the weights ", p.weights, "; --weights says ",
                          a.residency.mode);
  a.residency.mode = p.weights;
  const std::string size = str_cat(p.width, "x", p.height);
  if (a.size_given && parse_size(a.size, "--size") != std::pair{p.width, p.height})
    throw_job_input_error("--plan: the plan is for --size ", size, "; --size says ", a.size);
  a.size = size;
  a.size_given = true;
  if (a.frames_given && a.frames != p.frames)
    throw_job_input_error("--plan: the plan is for --frames ", p.frames, "; --frames says ",
                          a.frames);
  a.frames = p.frames;
  a.frames_given = true;
  return p;
}

std::vector<std::string> command_line_of(int argc, char** argv) {
  return std::vector<std::string>(argv, argv + argc);
}

GenerateOptions to_options(const GenerateArgs& a) {
  GenerateOptions o;
  ModelFiles given;
  given.dit = a.dit;
  given.t5 = a.t5;
  given.vae = a.vae;
  given.tokenizer = a.tokenizer;
  given.dit_low = a.dit_low;
  given.clip = a.clip;
  if (!a.dit_low.empty() && a.dit.empty())
    throw_input_error("--dit-low: the low-noise expert needs --dit (the high-noise expert)");
  o.files = resolve_model_files(a.model, given);
  if (a.prompt.empty() == a.prompts_file.empty())
    throw_input_error(
        "give the prompt with --prompt TEXT or a file of prompts with --prompts FILE");
  if (a.prompts_file.empty() && a.prompt.find_first_not_of(" \t\r\n") == std::string::npos)
    throw_input_error("--prompt: the prompt is empty");
  o.prompt = a.prompt;
  o.image = a.image;
  o.last_image = a.last_image;
  if (!a.last_image.empty() && a.image.empty())
    throw_input_error("--last-image: give the first frame with --image too");
  if (a.negative_given) o.negative_prompt = a.negative_prompt;
  if (a.size_given) {
    const auto [w, h] = parse_size(a.size, "--size");
    o.width = w;
    o.height = h;
  }
  if (a.frames_given) o.frames = a.frames;
  if (a.fps_given) o.fps_override = a.fps;
  if (a.steps < 1 || a.steps > 1000) throw_input_error("--steps: expected 1..1000, got ", a.steps);
  if (a.sampler != "unipc" && a.sampler != "dpm++" && a.sampler != "euler")
    throw_input_error("--sampler: expected unipc, dpm++ or euler, got '", a.sampler, "'");
  if (!(a.shift > 0)) throw_input_error("--shift: expected a positive number, got ", a.shift);
  if (!(a.guide_scale >= 0))
    throw_input_error("--guide-scale: expected a number >= 0, got ", a.guide_scale);
  if (!(a.fps > 0 && a.fps <= 1000)) throw_input_error("--fps: expected 0 < fps <= 1000");
  if (a.vae_tile < 0) throw_input_error("--vae-tile: expected >= 0, got ", a.vae_tile);
  o.denoise.sampler = a.sampler;
  o.denoise.steps = static_cast<int>(a.steps);
  o.denoise.shift = a.shift;
  o.denoise.guide_scale = a.guide_scale;
  o.denoise_given.steps = a.steps_given;
  o.denoise_given.shift = a.shift_given;
  o.denoise_given.guide_scale = a.guide_given;
  // As the reference: a negative seed draws a random one (recorded in the sidecar).
  o.seed = a.seed >= 0
               ? static_cast<uint64_t>(a.seed)
               : (static_cast<uint64_t>(std::random_device{}()) << 31) ^ std::random_device{}();
  o.precision = wan::parse_precision(a.precision, "--precision");
  o.vae_precision = a.vae_precision.empty()
                        ? o.precision
                        : wan::parse_precision(a.vae_precision, "--vae-precision");
  o.output = a.output;
  o.vae_tile = a.vae_tile;
  o.crf = static_cast<int>(a.crf);
  o.hash_models = !a.no_hash;
  o.attention = a.attention;
  o.accel = a.accel;
  o.weights_budget = a.residency.budget_bytes();
  o.keep_fp8 = a.residency.keep_fp8;
  o.keep_fp16 = a.residency.keep_fp16;
  o.sharded_weights = a.residency.sharded();
  if (a.seconds_given && !a.rollout)
    throw_input_error("--seconds: a length in seconds is for --rollout; use --frames");
  if (a.rollout) {
    RolloutOptions r;
    r.chunk_frames = a.chunk_frames;
    r.local_attn_frames = a.local_attn_size;
    r.sink_frames = a.sink_size;
    r.schedule.steps = parse_step_list(a.rollout_steps, "--rollout-steps");
    r.schedule.warp = !a.no_warp;
    r.schedule.shift = a.rollout_shift;
    if (a.chunk_frames < 1 || a.chunk_frames > 1024)
      throw_input_error("--chunk-frames: expected 1..1024, got ", a.chunk_frames);
    if (a.seconds_given) {
      if (a.frames_given) throw_input_error("--seconds and --frames: give one of them");
      if (!(a.seconds > 0 && a.seconds <= 3600))
        throw_input_error("--seconds: expected 0 < seconds <= 3600, got ", a.seconds);
      // Whole chunks: n chunks are chunk_frames x n latent frames, 4 x chunk_frames x n - 3 pixel
      // frames (the VAE makes 1 of latent frame 0, 4 of each later one); the least n at or above
      // the length.
      const double per_chunk = 4.0 * static_cast<double>(a.chunk_frames);
      const auto chunks = static_cast<int64_t>(
          std::max(1.0, std::ceil((a.seconds * a.fps + 3.0) / per_chunk - 1e-9)));
      o.frames = 4 * a.chunk_frames * chunks - 3;
    }
    o.rollout = r;
    o.force_causal = a.force_causal;
  } else if (a.force_causal) {
    throw_input_error("--force-causal: only with --rollout");
  }
  return o;
}

}  // namespace

void register_generate(CLI::App& app, int argc, char** argv) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Text to video with a Wan T2V model");
  cmd->add_option("--model", a->model,
                  "model folder: official Wan repo, diffusers repo or ComfyUI models folder");
  cmd->add_option("--dit", a->dit, "diffusion transformer file/folder (overrides --model)");
  cmd->add_option("--dit-low", a->dit_low,
                  "Wan 2.2 A14B: the low-noise expert (with --dit as the high-noise one)");
  cmd->add_option("--t5", a->t5, "umT5 text encoder file/folder (overrides --model)");
  cmd->add_option("--vae", a->vae, "VAE file/folder (overrides --model)");
  cmd->add_option("--tokenizer", a->tokenizer, "spiece.model or the folder holding it");
  cmd->add_option("--clip", a->clip,
                  "CLIP image encoder of Wan 2.1 I2V / FLF2V (overrides --model)");
  cmd->add_option("--image", a->image,
                  "image-to-video: the first frame (PNG, JPEG, WebP); --size then gives the area");
  cmd->add_option("--last-image", a->last_image, "first-last-frame (FLF2V) models: the last frame");
  cmd->add_option("--prompt,-p", a->prompt, "text prompt");
  cmd->add_option("--prompts", a->prompts_file,
                  "render every line of this UTF-8 file (blank lines skipped), loading each "
                  "model once; prompt i gets seed + i - 1 and output out_00i.mp4");
  auto* negative = cmd->add_option("--negative-prompt", a->negative_prompt,
                                   "negative prompt (default: the official Wan negative prompt)");
  auto* size = cmd->add_option(
      "--size", a->size, "WIDTHxHEIGHT, multiples of 16 (default: Wan 2.1 832x480, 2.2 1280x704)");
  auto* frames =
      cmd->add_option("--frames", a->frames, "frame count, 4k+1 (default: Wan 2.1 81, 2.2 121)");
  auto* steps = cmd->add_option("--steps", a->steps,
                                "denoising steps (default: the model's, 50; Wan 2.2 A14B 40)");
  cmd->add_option("--sampler", a->sampler, "unipc | dpm++ | euler (default unipc)");
  auto* shift = cmd->add_option("--shift", a->shift,
                                "flow-matching sigma shift (default: the model's, 5.0; Wan 2.2 "
                                "T2V A14B 12.0)");
  auto* guide = cmd->add_option("--guide-scale", a->guide_scale,
                                "classifier-free guidance scale, for both experts of a two-expert "
                                "model (default: the model's, 5.0; Wan 2.2 T2V A14B 4.0 high "
                                "noise / 3.0 low noise)");
  cmd->add_option("--seed", a->seed, "noise seed (default: random, recorded in the sidecar)");
  cmd->add_option("--precision", a->precision, "bf16 | fp32 for the DiT (default bf16)");
  cmd->add_option("--vae-precision", a->vae_precision,
                  "bf16 | fp32 for the VAE convolutions (default: as --precision; the official "
                  "VAE runs in fp32, bf16 is ~5x faster and within 5e-2 of it)");
  auto* fps =
      cmd->add_option("--fps", a->fps, "frames per second (default: Wan 2.1 16, Wan 2.2 24)");
  cmd->add_option("--crf", a->crf,
                  "encoder quality, lower is better (default: MP4 crf 10 as the official "
                  "imageio quality=8, WebM the VP9 default)");
  add_weight_args(cmd, a->residency);
  cmd->add_option("--vae-tile", a->vae_tile,
                  "decode in spatial tiles of this many latent pixels (default: no tiling)");
  cmd->add_option("-o,--output", a->output, "out.mp4 | out.webm | folder/ of PNG frames");
  cmd->add_option("--attention", a->attention,
                  "self-attention policy: dense | window:kt,kh,kw[:tile=bt,bh,bw][:sink] | "
                  "svg[:density=..,warmup=..] | spade[:..] | west:FILE[:budget=..], with optional "
                  "per-layer / per-step schedules (docs/sparse-attention.md; default dense)");
  cmd->add_option("--accel", a->accel,
                  "step method reusing work across steps: none | teacache[:thresh=..,mode=e|e0] "
                  "| magcache[:thresh=..,k=..,retention=..] | easycache[:thresh=..] | "
                  "hsa[:budget=..] (with --sampler euler) (docs/step-methods.md; default none)");
  cmd->add_flag("--dry-run", a->dry_run, "print the plan and memory estimate, load nothing");
  cmd->add_flag("--progress", a->progress, "progress display even when stderr is not a terminal");
  cmd->add_flag("--no-hash", a->no_hash, "skip the SHA-256 of the model files in the sidecar");
  cmd->add_flag("--json", a->json, "print the plan (dry run) or the result as JSON on stdout");
  add_mesh_args(cmd, a->mesh);
  cmd->add_flag("--rollout", a->rollout,
                "autoregressive rollout of a causal DiT (Self-Forcing / CausVid): chunk by chunk "
                "with a key/value cache, each chunk decoded and written as it is made");
  cmd->add_option("--chunk-frames", a->chunk_frames, "--rollout: latent frames per chunk (3)");
  cmd->add_option("--local-attn-size", a->local_attn_size,
                  "--rollout: rolling cache window in latent frames (-1: the reference's global "
                  "cache while it fits, then a window of that size)");
  cmd->add_option("--sink-size", a->sink_size,
                  "--rollout: latent frames kept at the front of a rolling cache (default 0 with "
                  "--local-attn-size, one chunk with the default window)");
  cmd->add_option("--rollout-steps", a->rollout_steps,
                  "--rollout: denoising steps per chunk (Self-Forcing 1000,750,500,250; CausVid "
                  "1000,757,522 with --no-warp --rollout-shift 8)");
  cmd->add_option("--rollout-shift", a->rollout_shift, "--rollout: timestep shift (5)");
  cmd->add_flag("--no-warp", a->no_warp,
                "--rollout: the steps are timesteps as given (CausVid), not table indices");
  auto* seconds = cmd->add_option("--seconds", a->seconds,
                                  "--rollout: video length in seconds (whole chunks, at --fps)");
  cmd->add_flag("--force-causal", a->force_causal,
                "--rollout: roll out a bidirectional DiT anyway (mechanics only)");
  cmd->add_option("--plan", a->plan_file,
                  "run the mesh and weight mode of a plan from `vidax plan -o` (under mpirun, "
                  "with its rankfile); the sidecar records it");
  const std::vector<std::string> command_line = command_line_of(argc, argv);
  cmd->callback([a, command_line, negative, size, frames, fps, steps, shift, guide, seconds] {
    a->seconds_given = seconds->count() > 0;
    a->steps_given = steps->count() > 0;
    a->shift_given = shift->count() > 0;
    a->guide_given = guide->count() > 0;
    a->negative_given = negative->count() > 0;
    a->size_given = size->count() > 0;
    a->frames_given = frames->count() > 0;
    a->fps_given = fps->count() > 0;
    std::optional<plan::PlanFile> topology_plan;
    if (!a->plan_file.empty()) topology_plan = apply_topology_plan(*a);
    const auto mesh = make_mesh(a->mesh);
    GenerateOptions o = to_options(*a);
    o.command_line = command_line;
    o.ctx = cli_context();
    o.ctx.mesh = mesh.get();
    // A random seed is drawn on rank 0 and shared, so every rank draws the same noise.
    o.seed = dist::broadcast_u64(mesh->world(), o.seed, 0);
    // The prompt file is read before anything else is opened, so its errors come first.
    const std::vector<std::string> prompts = a->prompts_file.empty()
                                                 ? std::vector<std::string>{o.prompt}
                                                 : read_prompt_file(a->prompts_file);
    const GenerationPlan plan = plan_generation(o);
    check_mesh_for_model(*mesh, plan.dit_config.value("num_heads", int64_t{0}),
                         true);  // generate always runs both branches, as the reference
    if (topology_plan) {
      const plan::PlanFile& tp = *topology_plan;
      const int64_t dim = plan.dit_config.value("dim", int64_t{0}),
                    heads = plan.dit_config.value("num_heads", int64_t{0}),
                    layers = plan.dit_config.value("num_layers", int64_t{0});
      if (dim != tp.dim || heads != tp.num_heads || layers != tp.num_layers)
        throw_job_input_error("--plan: ", a->plan_file, " was made for a DiT of dim ", tp.dim, ", ",
                              tp.num_heads, " heads, ", tp.num_layers,
                              " layers; this model has dim ", dim, ", ", heads, " heads, ", layers,
                              " layers");
      o.topology_plan = {{"file", a->plan_file},
                         {"topology", tp.topology},
                         {"mesh", tp.mesh.str()},
                         {"weights", tp.weights},
                         {"devices", tp.device_of_rank},
                         {"predicted_step_seconds", tp.predicted_step_seconds},
                         {"plan", tp.json}};
    }
    if (mesh->spec().ring > 1 && a->attention != "dense")
      throw_job_input_error("--attention ", a->attention, ": sparse attention runs under ",
                            "ulysses and cfg; ring attention is dense only (--mesh ", a->mesh.spec,
                            ")");
    const bool output_rank = is_output_rank();
    if (a->dry_run) {
      if (!output_rank) return;
      nlohmann::json j = plan.to_json();
      if (!a->prompts_file.empty()) j["prompts"] = prompts;
      if (a->json)
        std::printf("%s\n",
                    j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
      else
        std::printf("%s%s", plan.to_text().c_str(),
                    a->prompts_file.empty()
                        ? ""
                        : ("batch   " + std::to_string(prompts.size()) + " prompts from " +
                           a->prompts_file + ", each model loaded once\n")
                              .c_str());
      return;
    }
    require_fits(plan.memory, plan.available_bytes);
    install_temp_cleanup_handlers();
    if (o.rollout) {  // Ctrl-C publishes the chunks finished so far (once there are some)
      o.graceful_interrupt = true;
      o.cancelled = [] { return interrupt_requested(); };
    }
    Progress progress(stderr, output_rank && Progress::should_enable(a->progress));
    std::vector<GenerationItem> items;
    if (a->prompts_file.empty()) {
      items.push_back({o.prompt, o.seed, o.output});
    } else {
      const auto n = static_cast<int64_t>(prompts.size());
      for (int64_t i = 0; i < n; ++i)
        items.push_back({prompts[static_cast<size_t>(i)], o.seed + static_cast<uint64_t>(i),
                         o.output.empty() ? "" : batch_output_path(o.output, i, n)});
    }
    std::vector<GenerationResult> results;
    try {
      results = generate_batch(o, items, plan, progress);
    } catch (const Cancelled&) {  // Ctrl-C before a rollout's first chunk was finished
      std::fprintf(stderr,
                   "vidax: interrupted before the first chunk was finished: nothing "
                   "written\n");
      throw CLI::RuntimeError(130);
    }
    if (!output_rank) return;
    nlohmann::json all = nlohmann::json::array();
    for (size_t i = 0; i < results.size(); ++i) {
      const GenerationResult& r = results[i];
      if (a->json) {
        all.push_back({{"output", r.output},
                       {"sidecar", r.sidecar},
                       {"prompt", items[i].prompt},
                       {"frames", r.frames},
                       {"seed", items[i].seed},
                       {"seconds_per_step", r.seconds_per_step},
                       {"interrupted", r.interrupted},
                       {"accel", r.accel ? r.accel->to_json() : nlohmann::json()},
                       {"encode_seconds", r.encode_seconds},
                       {"denoise_seconds", r.denoise_seconds},
                       {"decode_seconds", r.decode_seconds},
                       {"total_seconds", r.total_seconds}});
      } else if (r.interrupted) {
        std::fprintf(
            stderr,
            "vidax: interrupted: wrote %s with the %lld frames (%lld of %lld chunks) "
            "finished before Ctrl-C, a playable video; settings in %s\n",
            r.output.c_str(), static_cast<long long>(r.frames), static_cast<long long>(r.chunks),
            static_cast<long long>(plan.rollout ? plan.rollout->chunks : 0), r.sidecar.c_str());
      } else {
        std::fprintf(stderr, "vidax: wrote %s (%lld frames, seed %llu) in %.1f s; settings in %s\n",
                     r.output.c_str(), static_cast<long long>(r.frames),
                     static_cast<unsigned long long>(items[i].seed), r.total_seconds,
                     r.sidecar.c_str());
      }
    }
    // One object for one --prompt (as before), an array for --prompts.
    if (a->json)
      std::printf("%s\n", (a->prompts_file.empty() ? all.front() : all)
                              .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                              .c_str());
    if (results.size() < items.size())
      std::fprintf(stderr, "vidax: interrupted: %zu of %zu videos written\n", results.size(),
                   items.size());
    for (const GenerationResult& r : results)
      if (r.interrupted || results.size() < items.size())
        throw CLI::RuntimeError(130);  // as a shell reports SIGINT
  });
}

}  // namespace vidax::cli
