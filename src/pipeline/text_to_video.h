// Text-to-video generation as the official Wan 2.1 T2V pipeline (wan/text2video.py) runs it:
// tokenize and encode the prompt and the negative prompt with umT5, draw the seeded noise,
// denoise with classifier-free guidance, decode with the VAE and stream the frames into the
// video writer. Each phase loads its model and releases it before the next one loads, so peak
// memory is the largest phase, not the sum. The plan (resolved files, configs, token count,
// memory per phase) is computed from checkpoint headers alone, before any weight is loaded.
// Not thread-safe (drives the models on the calling thread; kernels use OpenMP).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "accel/step_method.h"
#include "core/exec_context.h"
#include "models/wan/dit.h"
#include "pipeline/causal_rollout.h"
#include "pipeline/denoise.h"
#include "pipeline/model_defaults.h"
#include "pipeline/model_files.h"
#include "pipeline/progress.h"
#include "pipeline/resident_models.h"
#include "pipeline/video_request.h"
#include "sparse/attention_policy.h"

namespace vidax {

// wan/configs/shared_config.py `sample_neg_prompt` (the official default negative prompt).
extern const char* const kWanDefaultNegativePrompt;

struct GenerateOptions {
  ModelFiles files;
  std::string prompt;
  // Image-to-video: the first frame (PNG, JPEG or WebP), and for first-last-frame models the
  // last. With an image, the size's area is what counts: the output follows the image's aspect
  // ratio (pipeline/image_conditioning.h).
  std::string image, last_image;
  std::optional<std::string> negative_prompt;  // nullopt: the official default
  // Unset fields take the model's official defaults: Wan 2.1 832x480, 81 frames, 16 fps;
  // Wan 2.2 (its VAE) 1280x704, 121 frames, 24 fps.
  std::optional<int64_t> width, height, frames;
  std::optional<double> fps_override;
  DenoiseOptions denoise;  // sampler, steps, shift, guide_scale
  // Which of denoise's steps, shift and guide_scale the caller chose; the others take the
  // model family's official defaults (pipeline/model_defaults.h). A guide scale that is set
  // applies to both experts of a two-expert model.
  struct {
    bool steps = true, shift = true, guide_scale = true;
  } denoise_given;
  uint64_t seed = 0;
  wan::Precision precision = wan::Precision::kBF16;      // DiT and T5 GEMMs
  wan::Precision vae_precision = wan::Precision::kBF16;  // VAE convolutions
  // .mp4, .webm or a folder for PNG frames; empty: nothing is written (no video, no sidecar),
  // the frames only reach on_frames (what `vidax eval` does).
  std::string output;
  int crf = -1;          // -1: MP4 at the official quality (crf 10), WebM at the VP9 default
  int64_t vae_tile = 0;  // latent pixels per tile side for VAE decode (0: no tiling)
  // The DiT's packed weights stay under this many bytes (0: all resident); the blocks beyond
  // it stream from the checkpoint at every step (models/wan/dit.h WeightResidency).
  int64_t weights_budget = 0;
  // fp8 DiT weights (ComfyUI fp8 / scaled-fp8 files) stay fp8 in memory (WeightResidency::fp8).
  bool keep_fp8 = false;
  // With fp32 precision, fp16 DiT weights stay fp16 in memory (widened to f32 per call).
  bool keep_fp16 = false;
  // Under a mesh, each rank keeps 1/N of every DiT block, gathered before use (`--weights
  // sharded`, models/wan/dit.h WeightResidency::shard_group).
  bool sharded_weights = false;
  bool hash_models = true;
  // DiT self-attention policy spec (sparse/attention_policy.h, docs/sparse-attention.md).
  std::string attention = "dense";
  // Step method spec (accel/step_method.h, docs/step-methods.md): "none", "teacache:...",
  // "magcache:...", "easycache:...". A fresh method serves each video.
  std::string accel = "none";
  // When set, makes each video's step method instead of `accel` (a calibration tool's recorder).
  std::function<std::unique_ptr<accel::StepMethod>(const accel::RunInfo&)> accel_factory;
  // When set, used instead of `attention` (e.g. a calibration tool's instrumented policy).
  std::shared_ptr<sparse::AttentionPolicy> attention_policy;
  // When set (and the policy is not dense), every self-attention call also runs dense attention
  // and appends its error / recall record here (sparse/sparse_attention.h); slows the run.
  sparse::AttentionDiagnostics* attention_diagnostics = nullptr;
  std::vector<std::string> command_line;  // argv, recorded in the sidecar
  // `generate --plan`: the topology plan this run executes (plan/plan_file.h), recorded in the
  // sidecar as "topology_plan" beside the measured seconds per step. Null: none.
  nlohmann::json topology_plan;
  // Sees every chunk of decoded frames ([3, n, H, W] F32, raw) after the writer got it.
  std::function<void(const Tensor& frames)> on_frames;
  // Models kept loaded across calls (pipeline/resident_models.h); null: each phase loads its
  // model and releases it.
  std::shared_ptr<ResidentModels> resident;
  // Autoregressive rollout of a causal DiT (`generate --rollout`, pipeline/causal_rollout.h,
  // docs/rollout.md) instead of the bidirectional sampler: chunk by chunk with a key/value
  // cache, no guidance (denoise's sampler, steps, shift and guide scale are not used), each
  // chunk decoded and written as it is made. When `cancelled` turns true mid-rollout the frames
  // finished so far are published as a playable video (GenerationResult::interrupted) instead
  // of nothing. A bidirectional DiT is refused unless force_causal (mechanics only: it was not
  // trained for it).
  std::optional<RolloutOptions> rollout;
  bool force_causal = false;
  // With a rollout: once its first chunk is written, a first SIGINT only asks the run to publish
  // what it has (io/temp_paths.h install_graceful_interrupt; poll it with `cancelled`). Before
  // that, SIGINT leaves nothing as any other run.
  bool graceful_interrupt = false;
  // Polled between units of work (each prompt encoded, each denoising step, each decoded chunk
  // of frames) and before each phase: when it returns true the run stops by throwing Cancelled
  // (core/error.h), leaving no output behind.
  std::function<bool()> cancelled;
  // Threads and the device mesh (core/exec_context.h). Under a mesh every rank calls generate()
  // with the same options: the text is encoded once per CFG branch and broadcast, the DiT runs
  // split over the mesh, a tiled VAE decode deals its tiles to the ranks; world rank 0 alone
  // writes the video and the sidecar (which records the mesh) and reports progress.
  ExecContext ctx;
};

struct GenerationPlan {
  ModelFiles files;
  // "t2v"; "i2v" / "flf2v" (Wan 2.1: CLIP + VAE-encoded frames); "ti2v" (Wan 2.2 TI2V-5B with
  // an image: the encoded image is latent frame 0).
  std::string task = "t2v";
  int64_t image_width = 0, image_height = 0;  // the input image (i2v, flf2v, ti2v)
  int64_t max_area = 0;                       // image-to-video: the requested area
  std::string clip_layout;                    // i2v / flf2v
  nlohmann::json clip_config;
  std::string dit_model, dit_layout, t5_layout, vae_version;
  nlohmann::json dit_config, t5_config, vae_config;
  VideoRequest video;      // resolved size and frame count
  double fps = 16;         // resolved
  ModelDefaults defaults;  // the model family and its official defaults
  DenoiseOptions denoise;  // resolved (guide_scale: the high-noise expert's with two experts)
  // Two experts (files.dit_low set): the timestep boundary (ratio x 1000) and the low-noise
  // expert's guide scale.
  bool two_experts = false;
  double boundary = 0, guide_low = 0;
  std::string dit_low_layout;
  LatentGeometry latent;
  int64_t seq_len = 0;
  // Prompt tokens kept (incl. </s>): the T5's text_len, or the DiT's where that is shorter (a
  // model trained with a short text_len, as vidax-tiny; the official DiT could not take more).
  int64_t prompt_tokens = 0;
  // The step method: what it knows of the run, its canonical spec ("none" without one) and, when
  // its schedule is fixed before running (MagCache), that schedule's report.
  accel::RunInfo accel_run;
  std::string accel_spec = "none";
  std::optional<accel::StepReport> accel_planned;
  // --rollout: the chunks and the key/value cache (cache_bytes: all layers, k and v).
  std::optional<RolloutPlan> rollout;
  RolloutOptions rollout_options;
  double rollout_cache_bytes = 0;
  MemoryPlan memory;
  double available_bytes = -1;
  nlohmann::json to_json() const;
  std::string to_text() const;  // what --dry-run prints
};

// Opens every checkpoint's header, validates the request against the models (InputError with
// the nearest valid sizes), and estimates memory. Loads no weights.
GenerationPlan plan_generation(const GenerateOptions& options);

struct GenerationResult {
  std::string output, sidecar;
  double encode_seconds = 0, image_seconds = 0, denoise_seconds = 0, decode_seconds = 0,
         total_seconds = 0;
  double seconds_per_step = 0;
  int64_t frames = 0;
  // With a weights budget: the DiT's streamed blocks (models/wan/dit.h).
  wan::WeightStreamStats weight_stream;
  std::optional<accel::StepReport> accel;  // with a step method: what it ran
  // --rollout: the video holds the chunks finished before `cancelled` turned true (and says
  // so in the sidecar); chunks: how many were written.
  bool interrupted = false;
  int64_t chunks = 0;
  std::array<int, 2> expert_steps{};  // two experts: steps run by the high / low-noise one
  // What the sidecar file holds (also when no video is written); world rank 0 only.
  nlohmann::json sidecar_json;
};

// Runs the plan for options.prompt, options.seed and options.output. The video and its sidecar
// (`<output>.json`) appear only when complete; on any error (or SIGINT/SIGTERM once
// install_temp_cleanup_handlers() ran) nothing is left behind.
GenerationResult generate(const GenerateOptions& options, const GenerationPlan& plan,
                          Progress& progress);

// One video of a batch: its prompt, noise seed and output (empty: frames to on_frames only).
struct GenerationItem {
  std::string prompt;
  uint64_t seed = 0;
  std::string output;
};

// Runs the plan for every item (options.prompt, seed and output are not used), each model
// loaded once for the whole batch: umT5 encodes every prompt and the negative prompt once, the
// image conditioning is computed once, one DiT denoises each prompt in turn (a two-expert model
// loads its experts per prompt, as one expert is held at a time), one VAE decodes each. Each
// video is published with its sidecar as soon as it is decoded, so a failure later in the batch
// keeps the videos already finished (and leaves no partial file). Every output is checked
// before any work. Results in item order; a rollout stopped by `cancelled` ends the batch with
// the videos published so far (fewer results than items, the last one possibly interrupted).
std::vector<GenerationResult> generate_batch(const GenerateOptions& options,
                                             const std::vector<GenerationItem>& items,
                                             const GenerationPlan& plan, Progress& progress);

// The output of item `index` (0-based) of `count`: "out.mp4" -> "out_001.mp4", "frames/" ->
// "frames_001/" (at least 3 digits, more when count needs them).
std::string batch_output_path(const std::string& output, int64_t index, int64_t count);

std::string sidecar_path_for(const std::string& output);

}  // namespace vidax
