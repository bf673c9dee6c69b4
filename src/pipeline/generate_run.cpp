// generate() / generate_batch(): runs a GenerationPlan phase by phase (text, image, denoise,
// decode), each phase loading its model once for every prompt of the batch and releasing it
// before the next phase loads.
#include <omp.h>
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "core/error.h"
#include "core/memory_usage.h"
#include "core/thread_scratch.h"
#include "dist/mesh.h"
#include "dist/tensor_collectives.h"
#include "io/image_reader.h"
#include "io/temp_paths.h"
#include "io/video_writer.h"
#include "models/clip/clip_checkpoint.h"
#include "models/clip/clip_vision.h"
#include "models/wan/dit_checkpoint.h"
#include "models/wan/t5_checkpoint.h"
#include "models/wan/t5_encoder.h"
#include "models/wan/tokenizer.h"
#include "models/wan/vae.h"
#include "models/wan/vae_checkpoint.h"
#include "nn/image_resize.h"
#include "pipeline/image_conditioning.h"
#include "pipeline/model_hashes.h"
#include "pipeline/rollout_run.h"
#include "pipeline/text_to_video.h"
#include "sampling/torch_randn.h"
#include "sparse/pbsa.h"

namespace vidax {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void stop_if_cancelled(const GenerateOptions& o) {
  if (o.cancelled && o.cancelled()) throw Cancelled("the generation was cancelled");
}

std::string precision_name(wan::Precision p) {
  return p == wan::Precision::kBF16 ? "bf16" : "fp32";
}

VideoSpec video_spec(const GenerateOptions& o, const GenerationPlan& plan,
                     const std::string& output) {
  VideoSpec spec;
  spec.width = plan.video.width;
  spec.height = plan.video.height;
  spec.fps = plan.fps;
  spec.crf = o.crf;
  if (!output.empty() && o.crf < 0 && video_format_for_path(output) == VideoFormat::kMp4)
    spec.crf = kWanOfficialMp4Crf;
  return spec;
}

// 1. The prompts' contexts ([L_i, text_dim] each) and the negative prompt's (one for the whole
// batch). Under a mesh only the first rank of each CFG branch's sequence group loads umT5
// (with tp > 1: that rank's tp group, each rank its shard of the encoder): with cfg=2 it
// encodes its own branch's prompts only, with cfg=1 all; the contexts are then broadcast in
// the sequence group. A CFG rank runs one branch: the other branch's context is never read
// (denoise.h), so it gets a copy of its own.
void encode_text(const GenerateOptions& o, const GenerationPlan& plan,
                 const std::vector<GenerationItem>& items, const std::string& negative,
                 std::vector<Tensor>& contexts, Tensor& context_null, Progress& progress) {
  const dist::Mesh* mesh = o.ctx.mesh;
  const bool cfg_split = mesh != nullptr && mesh->cfg().size() > 1;
  const int branch = cfg_split ? mesh->cfg_rank() : -1;
  const bool encoder = mesh == nullptr || mesh->sp_rank() == 0;
  const int64_t n = static_cast<int64_t>(items.size());
  contexts.assign(items.size(), Tensor());
  if (encoder) {
    // A rollout runs no guidance: no negative prompt.
    const bool negative_branch = branch != 0 && !plan.rollout;
    const int64_t total = (branch != 1 ? n : 0) + (negative_branch ? 1 : 0);
    progress.begin_phase("encode text", static_cast<int>(total), "prompt");
    std::optional<wan::Tokenizer> own_tokenizer;
    std::optional<wan::T5Encoder> own_t5;
    if (!o.resident) {
      own_tokenizer.emplace(wan::Tokenizer::open(plan.files.tokenizer));
      const auto ck = wan::T5Checkpoint::open(plan.files.t5);
      own_t5.emplace(ck.config(), ck.loader(), o.precision, o.ctx);
      ck.source().release_resident_pages();
    }
    const wan::Tokenizer& tokenizer =
        o.resident ? o.resident->tokenizer(plan.files.tokenizer) : *own_tokenizer;
    wan::T5Encoder& t5 = o.resident ? o.resident->t5(plan.files.t5, o.precision, o.ctx) : *own_t5;
    int done = 0;
    if (branch != 1) {
      for (size_t i = 0; i < items.size(); ++i) {
        stop_if_cancelled(o);
        const auto t = Clock::now();
        contexts[i] = t5.encode(tokenizer.encode(items[i].prompt, plan.prompt_tokens));
        progress.tick(++done, seconds_since(t));
      }
    }
    // The reference always encodes and runs the negative branch, whatever the guide scale.
    if (negative_branch) {
      stop_if_cancelled(o);
      const auto t = Clock::now();
      context_null = t5.encode(tokenizer.encode(negative, plan.prompt_tokens));
      progress.tick(++done, seconds_since(t));
    }
    progress.end_phase();
  }
  if (mesh != nullptr && mesh->sp().size() > 1) {
    if (branch != 1)
      for (Tensor& c : contexts) dist::broadcast_tensor(mesh->sp(), c, 0);
    if (branch != 0) dist::broadcast_tensor(mesh->sp(), context_null, 0);
  }
  if (branch == 0) context_null = contexts.front();
  if (branch == 1)
    for (Tensor& c : contexts) c = context_null;
  release_thread_scratch();  // the encoder's kernel scratch is not the DiT's
}

// 2. Image conditioning (image-to-video), the same for every prompt: computed by world rank 0
// and broadcast (every rank needs the same tensors; one copy of the CLIP and VAE encoders is
// enough).
DenoiseConditioning encode_image(const GenerateOptions& o, const GenerationPlan& plan,
                                 Progress& progress) {
  DenoiseConditioning conditioning;
  const dist::Mesh* mesh = o.ctx.mesh;
  const bool encoder = mesh == nullptr || mesh->world().rank() == 0;
  const LatentGeometry& lg = plan.latent;
  if (encoder) {
    const auto t0 = Clock::now();
    progress.begin_phase("encode image", 1, "image");
    const RgbImage first = read_image(o.image);
    if (plan.task == "ti2v") {
      const Tensor pixels = ti2v_image(first, {plan.video.width, plan.video.height});  // [3,H,W]
      const auto ck = wan::VaeCheckpoint::open(plan.files.vae);
      wan::WanVae vae(ck.config(), ck.loader(), o.vae_precision, wan::VaeParts::kEncoder);
      ck.source().release_resident_pages();
      conditioning.first_frame =
          vae.encode(pixels.reshape(Shape{3, 1, plan.video.height, plan.video.width}));
    } else {
      const bool flf = plan.task == "flf2v";
      const Tensor first_t = rgb8_to_signed_unit(first.rgb, first.width, first.height);
      Tensor last_t;
      if (flf) {
        const RgbImage last = read_image(o.last_image);
        last_t = rgb8_to_signed_unit(last.rgb, last.width, last.height);
      }
      if (!plan.clip_config.is_null()) {  // CLIP sees the original image(s) at its own size
        const auto ck = clip::ClipCheckpoint::open(plan.files.clip);
        clip::ClipVisionEncoder enc(ck.config(), ck.loader(), ck.qkv(), o.precision);
        ck.source().release_resident_pages();
        std::vector<Tensor> images{first_t};
        if (flf) images.push_back(last_t);
        conditioning.clip_fea = enc.encode(images);  // [images, 257, clip_dim]
      }
      release_thread_scratch();
      const int64_t h = plan.video.height, w = plan.video.width;
      const Tensor first_r = resize_bicubic(first_t, h, w);
      Tensor last_r;
      if (flf) last_r = resize_bicubic(last_t, h, w);
      const auto ck = wan::VaeCheckpoint::open(plan.files.vae);
      wan::WanVae vae(ck.config(), ck.loader(), o.vae_precision, wan::VaeParts::kEncoder);
      ck.source().release_resident_pages();
      const Tensor latent =
          vae.encode(i2v_vae_input(first_r, flf ? &last_r : nullptr, plan.video.frames));
      conditioning.y =
          i2v_condition(i2v_frame_mask(plan.video.frames, lg.height, lg.width, flf), latent);
    }
    progress.tick(1, seconds_since(t0));
    progress.end_phase();
  }
  if (mesh != nullptr && mesh->world().size() > 1) {
    if (plan.task == "ti2v") {
      dist::broadcast_tensor(mesh->world(), conditioning.first_frame, 0);
    } else {
      dist::broadcast_tensor(mesh->world(), conditioning.y, 0);
      if (!plan.clip_config.is_null())
        dist::broadcast_tensor(mesh->world(), conditioning.clip_fea, 0);
    }
  }
  if (plan.task == "ti2v") conditioning.frame0_tokens = lg.tokens / lg.frames;  // one frame
  release_thread_scratch();
  return conditioning;
}

std::string batch_label(const char* phase, size_t index, size_t count) {
  if (count == 1) return phase;
  return std::string(phase) + " " + std::to_string(index + 1) + "/" + std::to_string(count);
}

}  // namespace

std::string batch_output_path(const std::string& output, int64_t index, int64_t count) {
  if (index < 0 || index >= count)
    throw_input_error("batch output: index ", index, " outside [0, ", count, ")");
  std::string base = output;
  bool folder = false;
  while (base.size() > 1 && base.back() == '/') {
    base.pop_back();
    folder = true;
  }
  const size_t width = std::max<size_t>(3, std::to_string(count).size());
  const std::string digits = std::to_string(index + 1);
  std::string number(1, '_');
  number.append(width - digits.size(), '0');
  number.append(digits);
  const std::filesystem::path p(base);
  if (folder || !p.has_extension()) return base + number + (folder ? "/" : "");
  return (p.parent_path() / (p.stem().string() + number + p.extension().string())).string();
}

GenerationResult generate(const GenerateOptions& o, const GenerationPlan& plan,
                          Progress& progress) {
  return generate_batch(o, {GenerationItem{o.prompt, o.seed, o.output}}, plan, progress).front();
}

std::vector<GenerationResult> generate_batch(const GenerateOptions& o,
                                             const std::vector<GenerationItem>& items,
                                             const GenerationPlan& plan, Progress& progress) {
  if (items.empty()) throw_input_error("generate: no prompt to render");
  const auto t_start = Clock::now();
  const size_t n = items.size();
  std::vector<GenerationResult> results(n);
  const dist::Mesh* mesh = o.ctx.mesh;
  const bool output_rank = mesh == nullptr || mesh->world().rank() == 0;
  for (size_t i = 0; i < n; ++i) {
    if (items[i].prompt.empty())
      throw_input_error("prompt ", i + 1, " of ", n, ": the prompt is empty");
    results[i].output = items[i].output;
    results[i].sidecar = items[i].output.empty() ? "" : sidecar_path_for(items[i].output);
  }
  // A bad output path fails before minutes of work: every writer is opened now. One video keeps
  // its writer (and temporary) from here on; in a batch each is closed again (its temporary
  // removed) and reopened when its frames are ready, so encoders are not all held at once.
  std::vector<std::unique_ptr<VideoWriter>> writers(n);
  for (size_t i = 0; i < n; ++i)
    if (!items[i].output.empty() && output_rank) {
      writers[i] = VideoWriter::open(items[i].output, video_spec(o, plan, items[i].output));
      if (n > 1) writers[i].reset();
    }

  // 1. Text: every prompt and the negative one, then the encoder is released.
  const std::string negative =
      o.negative_prompt.value_or(plan.defaults.negative_prefix + kWanDefaultNegativePrompt);
  std::vector<Tensor> contexts;
  Tensor context_null;
  {
    const auto t0 = Clock::now();
    encode_text(o, plan, items, negative, contexts, context_null, progress);
    const double seconds = seconds_since(t0) / static_cast<double>(n);
    for (GenerationResult& r : results) r.encode_seconds = seconds;
  }

  // 2. Image conditioning, shared by every prompt.
  DenoiseConditioning conditioning;
  if (plan.task != "t2v") {
    const auto t0 = Clock::now();
    conditioning = encode_image(o, plan, progress);
    const double seconds = seconds_since(t0);
    for (GenerationResult& r : results) r.image_seconds = seconds / static_cast<double>(n);
  }

  // 3. Denoise each prompt from its seeded noise, exactly the reference's shape and order, with
  // one DiT (or one pair of experts, each loaded once per prompt) for the whole batch.
  const LatentGeometry& g = plan.latent;
  const std::shared_ptr<sparse::AttentionPolicy> attention =
      o.attention_policy ? o.attention_policy
      : sparse::is_pbsa_spec(o.attention)
          ? sparse::make_attention_policy("dense")  // a rollout's cache policy (plan.rollout)
          : sparse::make_attention_policy(o.attention);
  std::vector<Tensor> latents(n);
  if (!plan.rollout) {
    // A DiT (or one expert), its weights resident or streamed under the budget (their loader
    // then keeps the checkpoint open: the blocks are read again at every step).
    auto make_dit = [&](const std::string& path) {
      if (progress.enabled()) progress.message("loading the diffusion transformer " + path);
      const auto ck = std::make_shared<const wan::DitCheckpoint>(wan::DitCheckpoint::open(path));
      auto dit = std::make_unique<wan::WanDit>(wan::open_dit(
          ck, o.precision, o.ctx, o.weights_budget, o.keep_fp8, o.sharded_weights, o.keep_fp16));
      dit->set_attention(attention->name() == "dense" ? nullptr : attention,
                         o.attention_diagnostics);
      return dit;
    };
    std::unique_ptr<wan::WanDit> own_dit;
    wan::WanDit* dit = nullptr;
    if (!plan.two_experts && o.resident) {
      dit = &o.resident->dit(plan.files.dit, o.precision, o.ctx, o.weights_budget, o.keep_fp8,
                             o.sharded_weights, o.keep_fp16);
      dit->set_attention(attention->name() == "dense" ? nullptr : attention,
                         o.attention_diagnostics);
    } else if (!plan.two_experts) {
      own_dit = make_dit(plan.files.dit);
      dit = own_dit.get();
    }
    for (size_t i = 0; i < n; ++i) {
      stop_if_cancelled(o);
      GenerationResult& r = results[i];
      const auto t0 = Clock::now();
      const Tensor noise =
          torch_randn(items[i].seed, Shape{g.channels, g.frames, g.height, g.width});
      // A fresh step method per video (its caches describe one trajectory).
      accel::RunInfo run = plan.accel_run;
      run.seed = items[i].seed;
      const std::unique_ptr<accel::StepMethod> method =
          o.accel_factory ? o.accel_factory(run) : accel::make_step_method(o.accel, run);
      DenoiseOptions denoise_options = plan.denoise;
      denoise_options.accel = method.get();
      double step_seconds = 0;
      auto on_step = [&](const DenoiseStep& s) {
        stop_if_cancelled(o);
        step_seconds += s.seconds;
        progress.tick(s.index + 1, s.seconds);
        if (plan.two_experts) ++r.expert_steps[static_cast<size_t>(s.expert)];
      };
      if (plan.two_experts) {
        DitExperts experts;
        experts.boundary = plan.boundary;
        experts.guide_high = plan.denoise.guide_scale;
        experts.guide_low = plan.guide_low;
        // (the sidecar's weight_stream stays empty: each expert is gone when the loop ends)
        experts.make_high = [&] { return make_dit(plan.files.dit); };
        experts.make_low = [&] { return make_dit(plan.files.dit_low); };
        progress.begin_phase(batch_label("denoise", i, n), plan.denoise.steps, "step");
        latents[i] = denoise_experts(experts, noise, contexts[i], context_null, plan.seq_len,
                                     denoise_options, on_step, o.ctx, conditioning);
      } else {
        progress.begin_phase(batch_label("denoise", i, n), plan.denoise.steps, "step");
        // This video's share of the stream counters (a DiT kept loaded counts across videos).
        const wan::WeightStreamStats before = dit->weight_stream_stats();
        latents[i] = denoise(*dit, noise, contexts[i], context_null, plan.seq_len, denoise_options,
                             on_step, o.ctx, conditioning);
        r.weight_stream = dit->weight_stream_stats();
        r.weight_stream.loads -= before.loads;
        r.weight_stream.uses -= before.uses;
        r.weight_stream.load_seconds -= before.load_seconds;
        r.weight_stream.wait_seconds -= before.wait_seconds;
      }
      progress.end_phase();
      if (method) r.accel = method->report();
      r.denoise_seconds = seconds_since(t0);
      r.seconds_per_step = step_seconds / plan.denoise.steps;
    }
  }
  release_thread_scratch();  // e.g. the widened GEMMs' f32 weight copies, before the VAE

  // 4. Decode with one VAE, streaming each chunk of frames into that prompt's writer as it is
  // produced; each video is published (with its sidecar) as soon as it is complete. Under a
  // mesh a tiled decode deals its tiles to every rank; an untiled one runs on rank 0 alone.
  const bool share_decode = mesh != nullptr && mesh->world().size() > 1 && o.vae_tile > 0 &&
                            (o.vae_tile < g.height || o.vae_tile < g.width);  // several tiles
  stop_if_cancelled(o);
  std::unique_ptr<wan::WanVae> own_vae;
  wan::WanVae* vae = nullptr;
  if (o.resident && (output_rank || share_decode)) {
    vae = &o.resident->vae_decoder(plan.files.vae, o.vae_precision);
  } else if (output_rank || share_decode) {
    const auto ck = wan::VaeCheckpoint::open(plan.files.vae);
    own_vae = std::make_unique<wan::WanVae>(ck.config(), ck.loader(), o.vae_precision,
                                            wan::VaeParts::kDecoder);
    ck.source().release_resident_pages();
    vae = own_vae.get();
  }
  // A rollout denoises and decodes together: its DiT is held beside the VAE.
  std::unique_ptr<wan::WanDit> rollout_dit;
  wan::WanDit* roll_dit = nullptr;
  if (plan.rollout) {
    if (o.resident) {
      roll_dit =
          &o.resident->dit(plan.files.dit, o.precision, o.ctx, 0, o.keep_fp8, false, o.keep_fp16);
      roll_dit->set_attention(nullptr);
    } else {
      if (progress.enabled())
        progress.message("loading the diffusion transformer " + plan.files.dit);
      const auto ck =
          std::make_shared<const wan::DitCheckpoint>(wan::DitCheckpoint::open(plan.files.dit));
      rollout_dit = std::make_unique<wan::WanDit>(
          wan::open_dit(ck, o.precision, o.ctx, 0, o.keep_fp8, false, o.keep_fp16));
      roll_dit = rollout_dit.get();
    }
  }
  json hashes;
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && results[i - 1].interrupted) {  // a rollout stopped by Ctrl-C ends the batch
      results.resize(i);
      break;
    }
    GenerationResult& r = results[i];
    const std::string& output = items[i].output;
    const bool write_video = !output.empty() && output_rank;
    const VideoSpec spec = video_spec(o, plan, output);
    std::unique_ptr<VideoWriter> writer = std::move(writers[i]);
    if (write_video && !writer) writer = VideoWriter::open(output, spec);
    if (plan.rollout && vae) {
      try {
        run_rollout(o, plan, *roll_dit, *vae, contexts[i], items[i].seed, writer.get(), r,
                    progress);
      } catch (const Cancelled&) {
        if (i == 0) throw;  // nothing was published
        results.resize(i);  // the videos before this one are published
        break;
      }
    } else if (vae) {
      const auto t0 = Clock::now();
      progress.begin_phase(batch_label("decode", i, n), static_cast<int>(g.frames), "latent frame");
      wan::VaeDecodeOptions tiling;
      tiling.tile_h = tiling.tile_w = o.vae_tile;
      tiling.overlap = o.vae_tile > 0 ? std::max<int64_t>(1, o.vae_tile / 8) : 0;
      if (share_decode) tiling.group = &mesh->world();
      int done = 0;
      auto t_chunk = Clock::now();
      vae->decode(
          latents[i],
          [&](const Tensor& frames) {  // [3, n, H, W]
            stop_if_cancelled(o);
            if (writer) writer->write(frames);
            r.frames += frames.dim(1);
            if (o.on_frames) o.on_frames(frames);
            progress.tick(++done, seconds_since(t_chunk));
            t_chunk = Clock::now();
          },
          tiling);
      progress.end_phase();
      r.decode_seconds = seconds_since(t0);
      latents[i] = Tensor();
    }
    r.total_seconds = seconds_since(t_start);
    if (!output_rank) continue;

    // 5. The sidecar; when there is a video, to a temporary, then the video and the sidecar are
    // renamed into place.
    if (o.hash_models && hashes.is_null()) {
      hashes = json::object();
      if (progress.enabled())
        progress.message("hashing model files for the sidecar (cached after the first run)");
      if (plan.two_experts) hashes["dit_low"] = model_file_hashes(plan.files.dit_low);
      if (!plan.files.clip.empty() && !plan.clip_config.is_null())
        hashes["clip"] = model_file_hashes(plan.files.clip);
      for (const auto& [key, path] : {std::pair<std::string, std::string>{"dit", plan.files.dit},
                                      {"t5", plan.files.t5},
                                      {"vae", plan.files.vae},
                                      {"tokenizer", plan.files.tokenizer}})
        hashes[key] = model_file_hashes(path);
    }
    json sidecar = {
        {"generator", "vidax 0.1.0"},
        {"task", plan.task},
        {"image", o.image.empty() ? json() : json(o.image)},
        {"last_image", o.last_image.empty() ? json() : json(o.last_image)},
        {"prompt", items[i].prompt},
        {"batch", n > 1 ? json{{"index", i}, {"count", n}} : json()},
        {"negative_prompt", negative},
        {"seed", items[i].seed},
        {"noise", "torch.randn on the CPU generator (torch.manual_seed(seed))"},
        {"size", {plan.video.width, plan.video.height}},
        {"frames", r.frames},
        {"fps", plan.fps},
        {"crf", spec.crf},
        {"steps", plan.denoise.steps},
        {"sampler", plan.denoise.sampler},
        {"shift", plan.denoise.shift},
        {"guide_scale", plan.denoise.guide_scale},
        {"model_family", plan.defaults.family},
        {"experts", plan.two_experts ? json{{"boundary_timestep", plan.boundary},
                                            {"guide_scale_high", plan.denoise.guide_scale},
                                            {"guide_scale_low", plan.guide_low},
                                            {"high_noise_steps", r.expert_steps[0]},
                                            {"low_noise_steps", r.expert_steps[1]}}
                                     : json()},
        {"attention", o.attention},
        {"accel", r.accel ? r.accel->to_json() : json{{"spec", "none"}}},
        {"precision", precision_name(o.precision)},
        {"vae_precision", precision_name(o.vae_precision)},
        {"vae_tile", o.vae_tile},
        {"attention_canonical", plan.rollout && plan.rollout_options.pbsa
                                    ? plan.rollout_options.pbsa->spec()
                                    : attention->name()},
        {"threads", omp_get_max_threads()},
        {"mesh", mesh != nullptr ? mesh->spec().str() : dist::MeshSpec{}.str()},
        {"processes", mesh != nullptr ? mesh->world().size() : 1},
        {"weights_budget_bytes", o.weights_budget},
        {"keep_fp8", o.keep_fp8},
        {"keep_fp16", o.keep_fp16},
        {"weights", o.sharded_weights ? "sharded" : "resident"},
        {"weight_stream",
         {{"pinned_blocks", r.weight_stream.pinned_blocks},
          {"streamed_blocks", r.weight_stream.streamed_blocks},
          {"window", r.weight_stream.window},
          {"loads", r.weight_stream.loads},
          {"uses", r.weight_stream.uses},
          {"load_seconds", r.weight_stream.load_seconds},
          {"wait_seconds", r.weight_stream.wait_seconds}}},
        {"plan", plan.to_json()},
        {"model_sha256", o.hash_models ? hashes : json::object()},
        {"timings",
         {{"encode_text_seconds", r.encode_seconds},
          {"encode_image_seconds", r.image_seconds},
          {"denoise_seconds", r.denoise_seconds},
          {"seconds_per_step", r.seconds_per_step},
          {"decode_seconds", r.decode_seconds},
          {"total_seconds", r.total_seconds}}},
        {"peak_rss_bytes", static_cast<double>(peak_resident_bytes())},
        {"command", o.command_line}};
    if (!o.topology_plan.is_null()) sidecar["topology_plan"] = o.topology_plan;
    if (plan.rollout) {
      const double rollout_seconds = r.denoise_seconds + r.decode_seconds;
      sidecar["rollout"] = {
          {"chunks_written", r.chunks},
          {"chunks_planned", plan.rollout->chunks},
          {"interrupted", r.interrupted},
          {"seconds_per_chunk", r.chunks > 0 ? rollout_seconds / static_cast<double>(r.chunks) : 0},
          {"frames_per_second",
           rollout_seconds > 0 ? static_cast<double>(r.frames) / rollout_seconds : 0},
          {"kv_cache_bytes", plan.rollout_cache_bytes}};
      for (const char* k : {"steps", "sampler", "shift", "guide_scale"}) sidecar.erase(k);
      sidecar["negative_prompt"] = nullptr;
      sidecar["guidance"] = "none (distilled into the causal DiT)";
    }
    r.sidecar_json = sidecar;
    if (!write_video) {
      r.output.clear();
      r.sidecar.clear();
      continue;
    }
    const std::string sidecar_tmp = temp_path_for(r.sidecar);
    TempPathGuard guard = TempPathGuard::file(sidecar_tmp);
    // Invalid UTF-8 in a prompt or path becomes U+FFFD rather than failing a finished run.
    const std::string text = sidecar.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
    write_whole_file(sidecar_tmp, {reinterpret_cast<const uint8_t*>(text.data()), text.size()},
                     true);
    // The video and its sidecar are published together: Ctrl-C is held back between the two
    // renames, and a failed sidecar rename takes the video back out.
    sigset_t block, previous;
    sigemptyset(&block);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&block, sig);
    pthread_sigmask(SIG_BLOCK, &block, &previous);
    std::error_code ec;
    try {
      writer->finish();
    } catch (...) {
      std::filesystem::remove(sidecar_tmp, ec);
      pthread_sigmask(SIG_SETMASK, &previous, nullptr);
      throw;
    }
    try {
      rename_into_place(sidecar_tmp, r.sidecar);
    } catch (...) {
      std::filesystem::remove(sidecar_tmp, ec);
      std::filesystem::remove_all(output, ec);
      pthread_sigmask(SIG_SETMASK, &previous, nullptr);
      throw;
    }
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  }
  return results;
}

}  // namespace vidax
