// `vidax demo`: the README's first command. Generates a clip with vidax-tiny (the small Wan 2.1
// T2V family trained on the synthetic world, shipped in models/vidax-tiny in the official
// layout) through exactly the code path real checkpoints take, and writes demo.mp4 + sidecar.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "apps/vidax/commands.h"
#include "core/error.h"
#include "io/png.h"
#include "io/temp_paths.h"
#include "io/video_writer.h"
#include "pipeline/text_to_video.h"
#include "pipeline/tiny_defaults.h"

namespace vidax::cli {
namespace {

namespace fs = std::filesystem;

// The demo's settings: vidax-tiny's defaults (pipeline/tiny_defaults.h).
constexpr const char* kDemoPrompt = tiny::kDemoPrompt;
constexpr int64_t kDemoSize = tiny::kSize, kDemoFrames = tiny::kFrames, kDemoSteps = tiny::kSteps;
constexpr double kDemoShift = tiny::kShift, kDemoGuideScale = tiny::kGuideScale;

}  // namespace

// Where the shipped model is: --model, $VIDAX_TINY_MODEL, next to the source tree the binary
// was built in (build/<preset>/vidax → models/vidax-tiny), or under the current folder.
std::string find_tiny_model(const std::string& flag) {
  if (!flag.empty()) return flag;
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("VIDAX_TINY_MODEL"); env && *env) candidates.emplace_back(env);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path() / "../../models/vidax-tiny");
    candidates.push_back(exe.parent_path() / "../share/vidax/models/vidax-tiny");
  }
  candidates.emplace_back("models/vidax-tiny");
  for (const auto& c : candidates)
    if (fs::is_regular_file(c / "config.json", ec)) return c.lexically_normal().string();
  throw_input_error(
      "vidax-tiny not found (looked in $VIDAX_TINY_MODEL, next to the build "
      "folder and in ./models/vidax-tiny); pass --model DIR");
}

void register_demo(CLI::App& app) {
  struct Args {
    std::string model, prompt = kDemoPrompt, output = "demo.mp4", strip, attention = "dense",
                       accel = "none";
    int64_t steps = kDemoSteps, seed = 42;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("demo", "Generate a clip with the shipped vidax-tiny model");
  cmd->add_option("--prompt,-p", a->prompt, "caption in the synthetic world's words");
  cmd->add_option("-o,--output", a->output, "output video (default demo.mp4)");
  cmd->add_option("--model", a->model, "vidax-tiny folder (default: found automatically)");
  cmd->add_option("--steps", a->steps, "denoising steps");
  cmd->add_option("--seed", a->seed, "noise seed (default 42)");
  cmd->add_option("--strip", a->strip,
                  "also write a PNG strip of every 4th frame (the README's picture)");
  cmd->add_option("--attention", a->attention,
                  "self-attention policy (see vidax generate --help; default dense)");
  cmd->add_option("--accel", a->accel, "step method (see vidax generate --help; default none)");
  cmd->add_flag("--json", a->json, "print the result as JSON on stdout");
  cmd->callback([a] {
    GenerateOptions o;
    o.attention = a->attention;
    o.accel = a->accel;
    o.files = resolve_model_files(find_tiny_model(a->model), {});
    if (a->prompt.empty()) throw_input_error("--prompt: the prompt is empty");
    if (a->steps < 1 || a->steps > 1000)
      throw_input_error("--steps: expected 1..1000, got ", a->steps);
    if (a->seed < 0) throw_input_error("--seed: expected >= 0, got ", a->seed);
    o.prompt = a->prompt;
    o.negative_prompt = std::string(tiny::kNegativePrompt);
    o.width = kDemoSize;
    o.height = kDemoSize;
    o.frames = kDemoFrames;
    o.denoise.steps = static_cast<int>(a->steps);
    o.denoise.shift = kDemoShift;
    o.denoise.guide_scale = kDemoGuideScale;
    o.seed = static_cast<uint64_t>(a->seed);
    o.precision = wan::Precision::kFP32;  // tiny GEMMs: f32 costs nothing and matches training
    o.vae_precision = wan::Precision::kFP32;
    o.output = a->output;
    o.command_line = {"vidax", "demo"};
    // Frames 0, 4, 8, ... side by side, for the README.
    std::vector<std::vector<uint8_t>> picked;
    int64_t seen = 0;
    if (!a->strip.empty())
      o.on_frames = [&](const Tensor& frames) {  // [3, n, H, W]
        const std::vector<uint8_t> rgb = to_uint8_rgb(frames);
        const size_t frame_bytes = static_cast<size_t>(kDemoSize * kDemoSize * 3);
        for (int64_t i = 0; i < frames.dim(1); ++i, ++seen)
          if (seen % 4 == 0)
            picked.emplace_back(rgb.begin() + static_cast<std::ptrdiff_t>(i * frame_bytes),
                                rgb.begin() + static_cast<std::ptrdiff_t>((i + 1) * frame_bytes));
      };
    const GenerationPlan plan = plan_generation(o);
    require_fits(plan.memory, plan.available_bytes);
    install_temp_cleanup_handlers();
    Progress progress(stderr, true);
    const GenerationResult r = generate(o, plan, progress);
    if (!a->strip.empty()) {
      const int64_t n = static_cast<int64_t>(picked.size()), w = kDemoSize, h = kDemoSize;
      std::vector<uint8_t> strip(static_cast<size_t>(n * w * h * 3));  // [h, n*w, 3]
      for (int64_t f = 0; f < n; ++f)
        for (int64_t y = 0; y < h; ++y)
          std::copy_n(picked[static_cast<size_t>(f)].begin() + y * w * 3, w * 3,
                      strip.begin() + (y * n * w + f * w) * 3);
      write_png(a->strip, strip, n * w, h);
    }
    if (a->json) {
      const nlohmann::json j = {{"output", r.output},
                                {"sidecar", r.sidecar},
                                {"frames", r.frames},
                                {"seconds_per_step", r.seconds_per_step},
                                {"total_seconds", r.total_seconds}};
      std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      std::fprintf(stderr, "vidax: wrote %s (%lld frames of \"%s\") in %.1f s; settings in %s\n",
                   r.output.c_str(), static_cast<long long>(r.frames), o.prompt.c_str(),
                   r.total_seconds, r.sidecar.c_str());
    }
  });
}

}  // namespace vidax::cli
