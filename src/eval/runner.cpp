#include "eval/runner.h"

#include <chrono>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/profile.h"
#include "eval/frame_cache.h"
#include "eval/metrics.h"
#include "io/video_writer.h"
#include "pipeline/text_to_video.h"
#include "synth/render.h"

namespace vidax::eval {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Restores the profiler's state when an evaluation ends (also on an exception).
class ProfilerScope {
 public:
  ProfilerScope() : was_(profile::enabled()) {}
  ~ProfilerScope() { profile::set_enabled(was_); }
  ProfilerScope(const ProfilerScope&) = delete;
  ProfilerScope& operator=(const ProfilerScope&) = delete;

 private:
  bool was_;
};

struct Generated {
  Tensor frames;  // U8 [F, H, W, 3]
  GenerationResult result;
  double attention_seconds = 0;
  std::vector<sparse::AttentionRecord> attention_records;
};

GenerateOptions base_options(const EvalRequest& rq, const EvalConfig& config,
                             const SuitePrompt& prompt, uint64_t seed) {
  GenerateOptions o;
  o.files = rq.files;
  o.prompt = prompt.text;
  o.negative_prompt = rq.negative_prompt;
  o.seed = seed;
  o.output.clear();  // frames only, nothing written
  o.hash_models = false;
  apply_config(config, o);
  return o;
}

Generated generate_clip(GenerateOptions o, const GenerationPlan& plan, bool timed,
                        bool attention_metrics = false) {
  Generated g;
  sparse::AttentionDiagnostics diagnostics;
  if (attention_metrics) o.attention_diagnostics = &diagnostics;
  const VideoRequest& v = plan.video;
  std::vector<uint8_t> bytes;
  bytes.reserve(static_cast<size_t>(v.frames * v.height * v.width * 3));
  o.on_frames = [&](const Tensor& frames) {  // [3, n, H, W]
    const std::vector<uint8_t> rgb = to_uint8_rgb(frames);
    bytes.insert(bytes.end(), rgb.begin(), rgb.end());
  };
  profile::set_enabled(timed);
  profile::reset();
  Progress quiet(stderr, false);
  g.result = generate(o, plan, quiet);
  if (timed)
    for (const auto& [name, v2] : profile::snapshot())
      if (name.rfind("attention.", 0) == 0) g.attention_seconds += v2.first;
  profile::set_enabled(false);
  g.attention_records = std::move(diagnostics.records);
  const int64_t frames = static_cast<int64_t>(bytes.size()) / (v.height * v.width * 3);
  VIDAX_CHECK(frames * v.height * v.width * 3 == static_cast<int64_t>(bytes.size()),
              "decoded frames are not whole");
  g.frames = Tensor::zeros(Shape{frames, v.height, v.width, 3}, DType::kU8);
  std::memcpy(g.frames.mutable_data<uint8_t>(), bytes.data(), bytes.size());
  return g;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string found_text(const synth::Analysis& a) {
  synth::SceneAttributes found;
  found.background = a.background;
  for (const auto& o : a.objects) found.objects.push_back(o.attributes);
  return synth::describe(found);
}

}  // namespace

synth::AdherenceScore score_clip(const synth::SceneAttributes& expected, const Tensor& frames) {
  return synth::score(expected, frames);
}

EvalReport run_eval(const EvalRequest& rq) {
  const auto t_start = Clock::now();
  ProfilerScope keep_profiler;
  EvalReport rep;
  rep.model_name = rq.model_name;
  rep.suite_name = rq.suite.name;
  rep.prompts = static_cast<int64_t>(rq.suite.prompts.size());
  rep.seeds = rq.suite.seeds;
  rep.config_spec = rq.config_spec;
  rep.reference_spec = rq.reference_spec;
  rep.config = rq.config;
  rep.reference = rq.reference;
  rep.same_as_reference = rq.config == rq.reference;
  rep.cache_dir = rq.cache_dir;
  rep.attention_metrics = rq.attention_metrics;

  // Plans first: a configuration the model cannot run fails before any work.
  const SuitePrompt probe{"plan", std::nullopt, std::nullopt};
  const GenerationPlan plan = plan_generation(base_options(rq, rq.config, probe, 0));
  require_fits(plan.memory, plan.available_bytes);
  std::optional<GenerationPlan> ref_plan;
  if (!rep.same_as_reference) {
    ref_plan = plan_generation(base_options(rq, rq.reference, probe, 0));
    require_fits(ref_plan->memory, ref_plan->available_bytes);
    if (ref_plan->video.width != plan.video.width || ref_plan->video.height != plan.video.height ||
        ref_plan->video.frames != plan.video.frames)
      throw_input_error("--against: the reference makes ", ref_plan->video.width, "x",
                        ref_plan->video.height, "x", ref_plan->video.frames,
                        " clips, the configuration ", plan.video.width, "x", plan.video.height, "x",
                        plan.video.frames, "; PSNR/SSIM need the same size and frame count");
  }

  if (rq.log)
    rq.log(str_cat(
        "vidax eval: ", rq.model_name, ", suite ", rq.suite.name, " (", rq.suite.prompts.size(),
        " prompts x ", rq.suite.seeds.size(), " seeds), config ", rq.config.canonical(),
        rep.same_as_reference ? " (its own reference)" : ", against " + rq.reference.canonical()));
  const FrameCache cache(rq.cache_dir);
  const std::string fingerprint = cache.enabled() ? model_fingerprint(rq.files) : std::string();
  const std::string config_text = rq.config.canonical(), ref_text = rq.reference.canonical();
  auto metadata = [&](const SuitePrompt& p, uint64_t seed, const std::string& config) {
    return std::map<std::string, std::string>{{"prompt", p.text},
                                              {"negative_prompt", rq.negative_prompt},
                                              {"seed", std::to_string(seed)},
                                              {"config", config},
                                              {"model", rq.model_name}};
  };

  const int64_t total = rq.suite.clips();
  int64_t index = 0;
  for (const SuitePrompt& prompt : rq.suite.prompts) {
    for (const uint64_t seed : rq.suite.seeds) {
      ++index;
      ClipResult c;
      c.prompt = prompt.text;
      c.seed = seed;
      Generated g = generate_clip(base_options(rq, rq.config, prompt, seed), plan, true,
                                  rq.attention_metrics);
      c.attention_records = std::move(g.attention_records);
      if (cache.enabled())
        cache.store(clip_key(fingerprint, config_text, prompt.text, rq.negative_prompt, seed),
                    g.frames, metadata(prompt, seed, config_text));
      c.seconds_per_step = g.result.seconds_per_step;
      c.denoise_seconds = g.result.seconds_per_step * rq.config.steps;
      c.attention_seconds = g.attention_seconds;
      c.total_seconds = g.result.total_seconds;
      if (g.result.accel) {
        c.work_fraction = g.result.accel->work_fraction;
        c.model_calls = g.result.accel->model_calls;
        c.block_stack_runs = g.result.accel->block_stack_runs;
        c.accel_details = g.result.accel->details;
      } else {
        c.model_calls = c.block_stack_runs = 2 * rq.config.steps;
      }
      c.temporal = temporal_change(g.frames);
      if (prompt.expected) {
        c.adherence = score_clip(*prompt.expected, g.frames);
        c.found = found_text(c.adherence->analysis);
      }
      if (!rep.same_as_reference) {
        const std::string key =
            clip_key(fingerprint, ref_text, prompt.text, rq.negative_prompt, seed);
        std::optional<Tensor> ref = cache.load(key, g.frames.shape());
        c.reference_from_cache = ref.has_value();
        if (!ref) {
          const Generated rg =
              generate_clip(base_options(rq, rq.reference, prompt, seed), *ref_plan, false);
          ref = rg.frames;
          c.reference_denoise_seconds = rg.result.seconds_per_step * rq.reference.steps;
          cache.store(key, *ref, metadata(prompt, seed, ref_text));
          ++rep.reference_generated;
        } else {
          ++rep.reference_cached;
        }
        c.psnr = psnr(g.frames, *ref, "clip");
        c.ssim = ssim(g.frames, *ref, "clip");
        c.temporal_reference = temporal_change(*ref);
      }
      if (rq.log) {
        std::string line = str_cat("[", index, "/", total, "] seed ", seed, " \"", prompt.text,
                                   "\": ", fmt("%.1f s", c.total_seconds),
                                   fmt(", %.3f s/step", c.seconds_per_step));
        if (c.adherence)
          line += str_cat(", adherence ", c.adherence->overall ? "ok" : "WRONG", " (found ",
                          c.found, ")");
        if (c.psnr)
          line += str_cat(fmt(", PSNR %.2f dB", *c.psnr), fmt(", SSIM %.4f", *c.ssim),
                          c.reference_from_cache ? " (reference cached)" : "");
        rq.log(line);
      }
      rep.clips.push_back(std::move(c));
    }
  }
  rep.wall_seconds = seconds_since(t_start);
  return rep;
}

EvalReport run_ground_truth(const Suite& suite, const EvalConfig& geometry,
                            const std::function<void(const std::string&)>& log) {
  const auto t_start = Clock::now();
  EvalReport rep;
  rep.mode = "ground-truth";
  rep.model_name = "synthetic world renders";
  rep.suite_name = suite.name;
  rep.prompts = static_cast<int64_t>(suite.prompts.size());
  rep.config = rep.reference = geometry;  // no generation seeds: a render has none
  const synth::ClipGeometry g{geometry.width, geometry.height, geometry.frames};
  synth::check_geometry(g, "--config size/frames");
  int64_t index = 0;
  for (const SuitePrompt& prompt : suite.prompts) {
    if (!prompt.scene_seed || !prompt.expected)
      throw_input_error("--ground-truth: prompt \"", prompt.text,
                        "\" has no synthetic scene to render (use --suite, not --prompts)");
    // A render does not depend on the generation seed: one clip per prompt.
    const Tensor frames = synth::render_rgb8(synth::sample_scene(*prompt.scene_seed), g);
    ClipResult c;
    c.prompt = prompt.text;
    c.seed = *prompt.scene_seed;
    c.adherence = score_clip(*prompt.expected, frames);
    c.found = found_text(c.adherence->analysis);
    c.temporal = temporal_change(frames);
    if (log)
      log(str_cat("[", ++index, "/", suite.prompts.size(), "] scene ", c.seed, " \"", prompt.text,
                  "\": ", c.adherence->overall ? "ok" : "WRONG", " (found ", c.found, ")"));
    rep.clips.push_back(std::move(c));
  }
  rep.wall_seconds = seconds_since(t_start);
  return rep;
}

}  // namespace vidax::eval
