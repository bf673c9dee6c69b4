#include "pipeline/text_to_video.h"

#include "sparse/pbsa.h"

#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "core/error.h"
#include "core/thread_scratch.h"
#include "dist/mesh.h"
#include "dist/tensor_collectives.h"
#include "io/image_reader.h"
#include "io/temp_paths.h"
#include "io/video_writer.h"
#include "kernels/cpu/gemm.h"
#include "models/clip/clip_checkpoint.h"
#include "models/clip/clip_vision.h"
#include "models/wan/dit_checkpoint.h"
#include "models/wan/dit_tensors.h"
#include "models/wan/t5_checkpoint.h"
#include "models/wan/t5_encoder.h"
#include "models/wan/tokenizer.h"
#include "models/wan/vae.h"
#include "models/wan/vae_checkpoint.h"
#include "nn/image_resize.h"
#include "pipeline/image_conditioning.h"
#include "pipeline/model_hashes.h"
#include "sampling/torch_randn.h"

namespace vidax {

const char* const kWanDefaultNegativePrompt =
    "色调艳丽，过曝，静态，细节模糊不清，字幕，风格，作品，画作，画面，静止，整体发灰，最差质量，"
    "低质量，JPEG压缩残留，丑陋的，残缺的，多余的手指，画得不好的手部，画得不好的脸部，畸形的，"
    "毁容的，形态畸形的肢体，手指融合，静止不动的画面，杂乱的背景，三条腿，背景人很多，倒着走";

namespace {

// The plan's step method: its spec, and its schedule when fixed before running.
nlohmann::json accel_json(const std::string& spec, const std::optional<accel::StepReport>& r) {
  if (spec == "none") return {{"spec", "none"}};
  if (!r) return {{"spec", spec}, {"schedule", "decided at run time"}};
  return r->to_json();
}

using nlohmann::json;

json rollout_json(const RolloutOptions& o, const RolloutPlan& p, double cache_bytes) {
  return {{"chunks", p.chunks},
          {"chunk_frames", o.chunk_frames},
          {"steps", o.schedule.steps},
          {"warp", o.schedule.warp},
          {"shift", o.schedule.shift},
          {"timesteps", p.schedule.t},
          {"context_noise", o.context_noise},
          {"cache", p.rolling ? "rolling" : "global"},
          {"cache_frames", p.cache_frames},
          {"sink_frames", p.sink_frames},
          {"persistent_tokens", p.persistent_tokens},
          {"attention", o.pbsa ? o.pbsa->spec() : "dense"},
          {"cache_bytes", cache_bytes}};
}

// What survives across phases: the two contexts, the latent and scheduler state, and the
// process itself (code, oneDNN, allocator slack) — measured as ~150 MiB for `vidax inspect`.
double resident_bytes(const wan::T5Config& t5, const LatentGeometry& g) {
  const double contexts = 2.0 * static_cast<double>(t5.text_len * t5.dim) * 4;
  const double latents = 6.0 * static_cast<double>(g.channels * g.frames * g.height * g.width) * 4;
  return contexts + latents + 150.0 * (1 << 20);
}

}  // namespace

std::string sidecar_path_for(const std::string& output) {
  std::string base = output;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  return base + ".json";
}

namespace {

// --rollout: what the request may be, the chunks and the cache (pipeline/causal_rollout.h).
void plan_rollout_request(const GenerateOptions& o, GenerationPlan& plan,
                          const wan::DitConfig& dc) {
  if (!dc.causal && !o.force_causal)
    throw_input_error("--rollout: ", o.files.dit, " is a bidirectional Wan ", dc.kind_name(),
                      " DiT; a rollout needs a causal one (Self-Forcing / CausVid: "
                      "self_forcing_dmd.pt, or a folder laid out as Self-Forcing's README); "
                      "--force-causal rolls this one out anyway (it was not trained for it)");
  if (plan.task != "t2v") throw_input_error("--rollout: text-to-video only (got ", plan.task, ")");
  if (plan.two_experts) throw_input_error("--rollout: a two-expert model cannot roll out");
  if (o.ctx.mesh != nullptr && o.ctx.mesh->world().size() > 1)
    throw_input_error("--rollout: runs in one process (mesh ", o.ctx.mesh->spec().str(), ")");
  if (o.accel != "none" || o.accel_factory)
    throw_input_error("--rollout: step methods (--accel ", o.accel, ") do not apply");
  if ((o.attention != "dense" && !sparse::is_pbsa_spec(o.attention)) || o.attention_policy)
    throw_input_error("--rollout: dense attention or pbsa (--attention ", o.attention, ")");
  if (o.weights_budget > 0 || o.sharded_weights)
    throw_input_error("--rollout: the DiT's weights stay resident (no --weights budget)");
  if (dc.patch[0] != 1) throw_input_error("--rollout: the DiT's temporal patch must be 1");
  plan.rollout_options = *o.rollout;
  if (sparse::is_pbsa_spec(o.attention))
    plan.rollout_options.pbsa = sparse::parse_pbsa_spec(o.attention);
  plan.rollout =
      plan_rollout(plan.rollout_options, plan.latent.frames,
                   (plan.latent.height / dc.patch[1]) * (plan.latent.width / dc.patch[2]));
  plan.rollout_cache_bytes =
      static_cast<double>(dc.num_layers) *
      static_cast<double>(plan.rollout->cache_frames * plan.rollout->frame_tokens +
                          plan.rollout->persistent_tokens) *
      2.0 * static_cast<double>(dc.dim) * (o.precision == wan::Precision::kBF16 ? 2.0 : 4.0);
}

}  // namespace

GenerationPlan plan_generation(const GenerateOptions& o) {
  wan::check_keep_fp16(o.keep_fp16, o.precision);  // before any model loads, and in a dry run
  GenerationPlan plan;
  plan.files = o.files;
  const auto dit = wan::DitCheckpoint::open(o.files.dit);
  dit.require_loadable();
  const auto t5 = wan::T5Checkpoint::open(o.files.t5);
  t5.require_loadable();
  const auto vae = wan::VaeCheckpoint::open(o.files.vae);
  vae.require_loadable();
  wan::Tokenizer::open(o.files.tokenizer);  // fails early on a bad tokenizer path

  const wan::DitConfig& dc = dit.config();
  const wan::T5Config& tc = t5.config();
  const wan::VaeConfig& vc = vae.config();
  plan.two_experts = !o.files.dit_low.empty();
  if (plan.two_experts) {  // the low-noise expert must be the same network as the high-noise one
    const auto low = wan::DitCheckpoint::open(o.files.dit_low);
    low.require_loadable();
    if (low.config().to_json() != dc.to_json())
      throw_input_error(o.files.dit_low, ": the low-noise expert's config ", low.config().to_json(),
                        " does not match the high-noise expert's ", dc.to_json(), " (", o.files.dit,
                        "): mismatched expert files");
    plan.dit_low_layout = wan::layout_name(low.layout());
  }
  // What the request is: text-to-video, or image-to-video with the model's own conditioning.
  // i2v models take y (mask + image latents): Wan 2.1 I2V / FLF2V also CLIP features through
  // their image branch, Wan 2.2 I2V A14B (two experts) none.
  const bool i2v_model = dc.kind == wan::DitKind::kI2V;
  const bool clip_model = dc.image_branch();
  const bool flf_model = clip_model && dc.flf_pos_tokens > 0;
  const bool ti2v_model = !i2v_model && vc.version == wan::VaeVersion::kWan22;
  if (i2v_model && o.image.empty())
    throw_input_error(o.files.dit, ": an image-to-video (", dc.kind_name(),
                      ") model turns an image into a video: give --image IMG",
                      flf_model ? " and --last-image IMG" : "");
  if (!o.image.empty() && !i2v_model && !ti2v_model)
    throw_input_error("--image: ", o.files.dit, " is a text-to-video model (", dc.kind_name(),
                      "); image-to-video needs a Wan 2.1 I2V / FLF2V, Wan 2.2 I2V A14B or Wan "
                      "2.2 TI2V-5B checkpoint");
  if (i2v_model && !clip_model && !plan.two_experts)
    throw_input_error(o.files.dit,
                      ": an image-to-video model without a CLIP branch is Wan 2.2 I2V A14B, "
                      "which comes as two experts: give the low-noise one with --dit-low (or "
                      "the folder with high_noise_model/ and low_noise_model/)");
  if (flf_model && o.last_image.empty())
    throw_input_error(o.files.dit, ": a first-last-frame (FLF2V) model needs --last-image IMG");
  if (!o.last_image.empty() && !flf_model)
    throw_input_error("--last-image: ", o.files.dit, " is not a first-last-frame (FLF2V) model");
  plan.task = i2v_model ? (flf_model ? "flf2v" : "i2v") : (o.image.empty() ? "t2v" : "ti2v");
  if (clip_model) {
    if (o.files.clip.empty())
      throw_input_error(
          o.files.dit, ": an image-to-video model needs the CLIP image encoder; ",
          "pass --clip FILE (models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth, "
          "diffusers image_encoder/ or ComfyUI clip_vision_h.safetensors)");
    const auto clip = clip::ClipCheckpoint::open(o.files.clip);
    clip.require_loadable();
    if (clip.config().dim != dc.clip_dim)
      throw_input_error(o.files.clip, ": CLIP width ", clip.config().dim,
                        " does not match the DiT's image branch (", dc.clip_dim, ", ", o.files.dit,
                        ")");
    if (flf_model && 2 * clip.config().tokens() != dc.flf_pos_tokens)
      throw_input_error(o.files.clip, ": CLIP gives ", clip.config().tokens(),
                        " tokens per image; the FLF2V model's position table takes ",
                        dc.flf_pos_tokens, " for two images");
    plan.clip_layout = clip::clip_layout_name(clip.layout());
    plan.clip_config = json::parse(clip.config().to_json());
  }
  if (!o.image.empty()) {
    const RgbImage image = read_image(o.image);
    plan.image_width = image.width;
    plan.image_height = image.height;
    if (!o.last_image.empty()) (void)read_image(o.last_image);  // fails before any weight loads
  }
  if (dc.text_dim != tc.dim)
    throw_input_error(o.files.t5, ": text encoder width ", tc.dim, " does not match the DiT's ",
                      "text_dim ", dc.text_dim, " (", o.files.dit, ")");
  // i2v models take the noise, 4 mask channels and the encoded frames.
  const int64_t expected_in = i2v_model ? 2 * vc.z_dim + 4 : vc.z_dim;
  if (dc.in_dim != expected_in || dc.out_dim != vc.z_dim)
    throw_input_error(o.files.vae, ": VAE latent channels ", vc.z_dim,
                      " do not match the DiT's in_dim/out_dim ", dc.in_dim, "/", dc.out_dim, " (",
                      o.files.dit, ")");

  plan.prompt_tokens = std::min(tc.text_len, dc.text_len);

  // The official defaults of the model family, for whatever the user did not set.
  plan.defaults = model_defaults(dc, vc, plan.two_experts);
  const ModelDefaults& d = plan.defaults;
  plan.video.width = o.width.value_or(d.width);
  plan.video.height = o.height.value_or(d.height);
  if (plan.task != "t2v") {  // the area counts; the image's aspect ratio gives the sides
    plan.max_area = plan.video.width * plan.video.height;
    const PixelSize size =
        plan.task == "ti2v"
            ? wan22_best_output_size(plan.image_width, plan.image_height,
                                     vc.spatial_stride() * dc.patch[2],
                                     vc.spatial_stride() * dc.patch[1], plan.max_area)
            : wan21_i2v_size(plan.image_width, plan.image_height, plan.max_area,
                             vc.spatial_stride(), dc.patch[1]);
    plan.video.width = size.width;
    plan.video.height = size.height;
  }
  plan.video.frames = o.frames.value_or(d.frames);
  plan.fps = o.fps_override.value_or(d.fps);
  plan.denoise = o.denoise;
  if (!o.denoise_given.steps) plan.denoise.steps = d.steps;
  if (!o.denoise_given.shift) plan.denoise.shift = d.shift;
  // Wan 2.1 generate.py: I2V at 832*480 / 480*832 samples with shift 3 (Wan 2.2's does not).
  if (!o.denoise_given.shift && plan.task == "i2v" && clip_model && o.width && o.height &&
      ((*o.width == 832 && *o.height == 480) || (*o.width == 480 && *o.height == 832)))
    plan.denoise.shift = 3.0;
  plan.denoise.guide_scale = o.denoise_given.guide_scale ? o.denoise.guide_scale : d.guide_high;
  plan.guide_low = o.denoise_given.guide_scale ? o.denoise.guide_scale : d.guide_low;
  if (plan.two_experts) {
    const double ratio = o.files.boundary_ratio > 0 ? o.files.boundary_ratio : d.boundary_ratio;
    plan.boundary = ratio * 1000.0;  // num_train_timesteps
  }

  GeometryRules rules;
  rules.temporal_stride = vc.temporal_stride() * dc.patch[0];
  rules.spatial_multiple = vc.spatial_stride() * dc.patch[1];
  validate_video_request(plan.video, rules);
  plan.latent = latent_geometry(plan.video, vc.z_dim, vc.temporal_stride(), vc.spatial_stride(),
                                dc.patch[0], dc.patch[1]);
  plan.seq_len = plan.latent.tokens;  // ceil(...) with one sequence-parallel rank
  if (o.rollout) {
    plan_rollout_request(o, plan, dc);
  } else if (dc.causal) {
    throw_input_error(o.files.dit, ": a causal (Self-Forcing / CausVid) DiT generates chunk by ",
                      "chunk with --rollout; sampled bidirectionally it gives noise");
  }
  // A bad --attention spec fails here, before any weight is loaded.
  if (!o.attention_policy && !(o.rollout && sparse::is_pbsa_spec(o.attention)))
    (void)sparse::make_attention_policy(o.attention);
  // The step method likewise; generate always runs both CFG branches.
  plan.accel_run.dit = dc;
  plan.accel_run.steps = plan.denoise.steps;
  plan.accel_run.branches = 2;
  plan.accel_run.width = plan.video.width;
  plan.accel_run.height = plan.video.height;
  plan.accel_run.tokens = plan.latent.tokens;
  plan.accel_run.sampler = plan.denoise.sampler;
  plan.accel_run.latent = {plan.latent.frames, plan.latent.height, plan.latent.width};
  plan.accel_run.seed = o.seed;
  plan.accel_run.image_conditioned = !o.image.empty();
  if (o.ctx.mesh != nullptr) {
    plan.accel_run.sequence_parallel = o.ctx.mesh->spec().ring * o.ctx.mesh->spec().ulysses;
    plan.accel_run.tensor_parallel = o.ctx.mesh->spec().tp;
    plan.accel_run.cfg_parallel = o.ctx.mesh->spec().cfg;
  }
  // What the step method keeps during the denoise phase: the block-stack residual ([tokens, dim]
  // f32 per CFG branch) or the key/value store (every layer's k and v for every token, per
  // branch, in the compute dtype).
  double accel_bytes = 0;
  if (o.accel_factory) {
    plan.accel_spec = "custom";
  } else if (const auto method = accel::make_step_method(o.accel, plan.accel_run)) {
    plan.accel_spec = method->name();
    const double tokens = static_cast<double>(plan.latent.tokens),
                 dim = static_cast<double>(dc.dim);
    if (method->block_hook()) accel_bytes += 2 * tokens * dim * 4;
    accel_bytes += method->state_bytes(o.precision == wan::Precision::kBF16);
    if (method->needs_kv_store())
      accel_bytes += 2 * static_cast<double>(dc.num_layers) * tokens * 2 * dim *
                     (o.precision == wan::Precision::kBF16 ? 2.0 : 4.0);
    plan.accel_planned = method->planned_report();
  }

  plan.dit_model = dc.kind_name();
  plan.dit_layout = wan::layout_name(dit.layout());
  plan.t5_layout = wan::t5_layout_name(t5.layout());
  plan.vae_version = vc.version_name();
  plan.dit_config = json::parse(dc.to_json());
  plan.t5_config = json::parse(tc.to_json());
  plan.vae_config = json::parse(vc.to_json());

  // The text encoder runs on the real tokens only; 512 is the worst case.
  const double t5_weights = static_cast<double>(wan::T5Encoder::weight_bytes(tc, o.precision));
  // The DiT's blocks divide over tensor-parallel ranks, are one byte per weight when an fp8
  // checkpoint is kept fp8 (two when an fp16 one is kept fp16), and a weights budget caps what
  // stays.
  const int tp = o.ctx.mesh != nullptr ? o.ctx.mesh->spec().tp : 1;
  int kept_item = 0;
  if (dc.num_layers > 0 && o.keep_fp8 && dit.get_fp8("blocks.0.ffn.0.weight").has_value())
    kept_item = 1;
  if (dc.num_layers > 0 && o.keep_fp16 && o.precision == wan::Precision::kFP32 &&
      dit.source().tensor(dit.file_name("blocks.0.ffn.0.weight")).dtype() == DType::kF16)
    kept_item = 2;
  const double layers = static_cast<double>(dc.num_layers);
  const double stem = static_cast<double>(wan::dit_parameter_count(dc)) *
                          (o.precision == wan::Precision::kBF16 ? 2.0 : 4.0) -
                      layers * wan::WanDit::block_weight_bytes(dc, o.precision, 1);
  double dit_weights =
      stem + layers * wan::WanDit::block_weight_bytes(dc, o.precision, tp, kept_item);
  if (o.weights_budget > 0)
    dit_weights = std::min(dit_weights, static_cast<double>(o.weights_budget));
  // Where bf16 GEMMs widen (no AMX, or VIDAX_GEMM=widened: kernels/cpu/gemm.h) or kept weights
  // are widened whole (not fp8 on AMX, which widens per tile), each call widens its weight into a
  // per-thread scratch as large as the largest matrix (f32 when widened, else the compute dtype).
  double dit_widen_scratch = 0;
  const DType compute = o.precision == wan::Precision::kBF16 ? DType::kBF16 : DType::kF32;
  const bool widens = o.precision == wan::Precision::kBF16 && gemm_widens_bf16();
  if (widens || (kept_item > 0 && gemm_kept_widens_whole(compute))) {
    const double item = widens || o.precision == wan::Precision::kFP32 ? 4.0 : 2.0;
    for (const auto& d : wan::dit_tensor_decls(dc))
      if (d.shape.rank() == 2)
        dit_widen_scratch =
            std::max(dit_widen_scratch, item * static_cast<double>(d.shape.numel()) / tp);
  }
  wan::VaeDecodeOptions tiling;
  tiling.tile_h = tiling.tile_w = o.vae_tile;
  tiling.overlap = o.vae_tile > 0 ? std::max<int64_t>(1, o.vae_tile / 8) : 0;
  const double vae_weights =
      static_cast<double>(wan::WanVae::weight_bytes(vc, o.vae_precision, wan::VaeParts::kDecoder));
  // The VAE's own estimate runs 10-15% under the measured RSS (docs/vae.md): add the margin.
  const double vae_peak = 1.15 * static_cast<double>(wan::WanVae::decode_peak_bytes(
                                     vc, plan.video.height, plan.video.width, o.vae_precision,
                                     tiling, wan::VaeParts::kDecoder));
  plan.memory.phases = {
      {"encode text", t5_weights,
       static_cast<double>(wan::T5Encoder::activation_bytes(tc, plan.prompt_tokens))},
      {"denoise", dit_weights,
       wan::WanDit::activation_bytes(dc, plan.latent.tokens) + dit_widen_scratch + accel_bytes},
      {"decode", vae_weights, std::max(0.0, vae_peak - vae_weights)}};
  if (plan.rollout) {
    // The DiT and the VAE decoder are held together (each chunk is decoded as it is made); the
    // DiT works on one chunk's tokens beside the key/value cache.
    const int64_t chunk_tokens = plan.rollout_options.chunk_frames * plan.rollout->frame_tokens;
    plan.memory.phases = {plan.memory.phases.front(),
                          {"rollout", dit_weights + vae_weights,
                           wan::WanDit::activation_bytes(dc, chunk_tokens) + dit_widen_scratch +
                               plan.rollout_cache_bytes + std::max(0.0, vae_peak - vae_weights)}};
  }
  if (plan.task != "t2v") {
    // One model at a time: the CLIP encoder (Wan 2.1), then the VAE encoder with its input
    // clip [3, frames, H, W]; the phase is the larger of the two.
    PhaseMemory clip_phase{"encode image", 0, 0};
    if (!plan.clip_config.is_null()) {
      const auto cc = clip::clip_vision_config_from_json(plan.clip_config.dump(), "CLIP config");
      const int64_t images = plan.task == "flf2v" ? 2 : 1;
      clip_phase.weight_bytes =
          static_cast<double>(clip::ClipVisionEncoder::weight_bytes(cc, o.precision));
      clip_phase.activation_bytes =
          static_cast<double>(clip::ClipVisionEncoder::activation_bytes(cc, images));
    }
    PhaseMemory vae_phase{"encode image", 0, 0};
    vae_phase.weight_bytes = static_cast<double>(
        wan::WanVae::weight_bytes(vc, o.vae_precision, wan::VaeParts::kEncoder));
    // The VAE's own estimate runs 10-15% under the measured RSS (as for decode).
    const double vae_peak = 1.15 * static_cast<double>(wan::WanVae::encode_peak_bytes(
                                       vc, plan.video.height, plan.video.width, o.vae_precision,
                                       wan::VaeParts::kEncoder));
    const double clip_in = 4.0 * 3 * static_cast<double>(plan.video.frames) *
                           static_cast<double>(plan.video.height * plan.video.width);
    vae_phase.activation_bytes = std::max(0.0, vae_peak - vae_phase.weight_bytes) + clip_in;
    plan.memory.phases.insert(plan.memory.phases.begin() + 1,
                              clip_phase.total() > vae_phase.total() ? clip_phase : vae_phase);
  }
  plan.memory.resident_bytes = resident_bytes(tc, plan.latent);
  plan.available_bytes = available_memory_bytes();
  return plan;
}

json GenerationPlan::to_json() const {
  json phases = json::array();
  for (const auto& p : memory.phases)
    phases.push_back({{"phase", p.phase},
                      {"weight_bytes", p.weight_bytes},
                      {"activation_bytes", p.activation_bytes},
                      {"total_bytes", p.total()}});
  return {
      {"files",
       {{"layout", files.layout},
        {"dit", files.dit},
        {"t5", files.t5},
        {"vae", files.vae},
        {"tokenizer", files.tokenizer},
        {"clip", files.clip}}},
      {"task", task},
      {"image",
       task == "t2v"
           ? json()
           : json{{"width", image_width}, {"height", image_height}, {"max_area", max_area}}},
      {"clip",
       clip_config.is_null() ? json() : json{{"layout", clip_layout}, {"config", clip_config}}},
      {"dit", {{"model", dit_model}, {"layout", dit_layout}, {"config", dit_config}}},
      {"family", defaults.family},
      {"accel", accel_json(accel_spec, accel_planned)},
      {"denoise",
       {{"sampler", denoise.sampler},
        {"steps", denoise.steps},
        {"shift", denoise.shift},
        {"guide_scale", denoise.guide_scale}}},
      {"rollout", rollout ? rollout_json(rollout_options, *rollout, rollout_cache_bytes) : json()},
      {"experts", two_experts ? json{{"high_noise", files.dit},
                                     {"low_noise", files.dit_low},
                                     {"low_noise_layout", dit_low_layout},
                                     {"boundary_timestep", boundary},
                                     {"guide_scale_high", denoise.guide_scale},
                                     {"guide_scale_low", guide_low}}
                              : json()},
      {"t5", {{"layout", t5_layout}, {"config", t5_config}}},
      {"vae", {{"version", vae_version}, {"config", vae_config}}},
      {"video",
       {{"width", video.width}, {"height", video.height}, {"frames", video.frames}, {"fps", fps}}},
      {"latent", {latent.channels, latent.frames, latent.height, latent.width}},
      {"tokens", latent.tokens},
      {"seq_len", seq_len},
      {"prompt_tokens", prompt_tokens},
      {"memory",
       {{"phases", phases},
        {"resident_bytes", memory.resident_bytes},
        {"peak_bytes", memory.peak_bytes()},
        {"available_bytes", available_bytes},
        {"fits", available_bytes <= 0 || memory.peak_bytes() <= available_bytes}}}};
}

std::string GenerationPlan::to_text() const {
  std::ostringstream s;
  s << "files (" << files.layout << " layout)\n"
    << "  dit        " << files.dit << "  [" << dit_layout << ", " << dit_model
    << (two_experts ? ", high-noise expert" : "") << "]\n";
  if (two_experts)
    s << "  dit (low)  " << files.dit_low << "  [" << dit_low_layout << ", low-noise expert]\n";
  s << "  t5         " << files.t5 << "  [" << t5_layout << "]\n"
    << "  vae        " << files.vae << "  [Wan " << vae_version << " VAE]\n"
    << "  tokenizer  " << files.tokenizer << "\n";
  if (!clip_config.is_null()) s << "  clip       " << files.clip << "  [" << clip_layout << "]\n";
  s << "task    " << task;
  if (task != "t2v")
    s << " (image " << image_width << "x" << image_height << ", area " << max_area
      << ": the output follows the image's aspect ratio)";
  s << "\n"
    << "video   " << video.width << "x" << video.height << ", " << video.frames << " frames at "
    << fps << " fps\n";
  if (rollout) {
    s << "rollout " << rollout->chunks << " chunks of " << rollout_options.chunk_frames
      << " latent frames, t";
    for (float t : rollout->schedule.t) s << " " << t;
    s << ", shift " << rollout_options.schedule.shift << ", no guidance\n"
      << "        cache " << (rollout->rolling ? "rolling " : "global ") << rollout->cache_frames
      << " frames";
    if (rollout->rolling) s << " (sink " << rollout->sink_frames << ")";
    if (rollout_options.pbsa)
      s << " + " << rollout->persistent_tokens << " rows of persistent blocks, "
        << rollout_options.pbsa->spec();
    s << ", " << format_bytes(rollout_cache_bytes) << "\n";
  } else {
    s << "denoise " << defaults.family << ": " << denoise.sampler << ", " << denoise.steps
      << " steps, shift " << denoise.shift << ", guide " << denoise.guide_scale;
    if (two_experts) s << " (high noise, t >= " << boundary << "), " << guide_low << " (low noise)";
    s << "\n";
  }
  if (accel_spec != "none") {
    s << "accel   " << accel_spec;
    if (accel_planned) {
      char line[160];
      std::snprintf(line, sizeof line, ": %lld of %lld block-stack runs, %.1f%% of the dense work",
                    static_cast<long long>(accel_planned->block_stack_runs),
                    static_cast<long long>(accel_planned->dense_calls),
                    100.0 * accel_planned->work_fraction);
      s << line << "\n        cond   " << accel_planned->schedule_cond << "\n        uncond "
        << accel_planned->schedule_uncond;
      if (!accel_planned->details.is_null()) s << "\n        " << accel_planned->details.dump();
    } else {
      s << " (decided at run time)";
    }
    s << "\n";
  }
  s << "latent  [" << latent.channels << ", " << latent.frames << ", " << latent.height << ", "
    << latent.width << "]  tokens " << latent.tokens << "  seq_len " << seq_len << "\n"
    << "memory (phases run one after another; each releases its model)\n";
  for (const auto& p : memory.phases) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-12s weights %10s  activations %10s  total %10s\n",
                  p.phase.c_str(), format_bytes(p.weight_bytes).c_str(),
                  format_bytes(p.activation_bytes).c_str(), format_bytes(p.total()).c_str());
    s << line;
  }
  s << "  resident across phases " << format_bytes(memory.resident_bytes) << "\n"
    << "  estimated peak " << format_bytes(memory.peak_bytes()) << " (" << memory.largest().phase
    << ")";
  if (available_bytes > 0)
    s << ", available " << format_bytes(available_bytes)
      << (memory.peak_bytes() <= available_bytes ? ": fits" : ": DOES NOT FIT");
  s << "\n";
  return s.str();
}

}  // namespace vidax
