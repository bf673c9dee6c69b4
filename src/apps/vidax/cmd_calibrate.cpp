// `vidax calibrate`: the offline passes that record a model's own tables.
//  - `--method west` (default): ScalingAttention's WEST prior (docs/sparse-attention.md). Runs
//    generations with every self-attention call planned dense by a recorder that accumulates each
//    (layer, head)'s attention mass on a normalized cell grid, and writes the prior file that
//    `--attention west:FILE` resamples at run time.
//  - `--method magcache`: MagCache's magnitude ratios (docs/step-methods.md): dense generations
//    whose block-stack residual norms are compared call to call, averaged over the prompts, for
//    `--accel magcache:ratios=FILE`.
//  - `--method teacache [--mode e|e0]`: TeaCache's polynomial: the relative changes of the
//    modulated input and of the output between consecutive calls, fitted with a degree-4
//    polynomial, for `--accel teacache:table=FILE`.
//   vidax calibrate --model DIR --prompts FILE -o prior.west
//   vidax calibrate --model DIR --synth 8 -o prior.west      (synthetic captions, seeds >= 8e6)
//   vidax calibrate --method magcache --model DIR --synth 4 --steps 20 -o ratios.json
// Calibration prompts must not be the evaluation suite's: the synthetic option only draws seeds
// from 8,000,000 up, and a prompts file is the user's responsibility.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "accel/magcache_calibration.h"
#include "accel/teacache_calibration.h"
#include "apps/vidax/commands.h"
#include "core/error.h"
#include "io/temp_paths.h"
#include "pipeline/text_to_video.h"
#include "sparse/west_policy.h"
#include "synth/synth_world.h"

namespace vidax::cli {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kFirstCalibrationSeed = 8'000'000;

std::vector<std::string> read_prompts(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw_input_error("--prompts ", path, ": cannot open the file");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;  // blank or comment
    out.push_back(line.substr(first));
  }
  if (out.empty()) throw_input_error("--prompts ", path, ": no prompts (one per line)");
  return out;
}

std::array<int64_t, 3> parse_grid(const std::string& text) {
  const std::vector<int64_t> v = parse_int_list(text, "--grid");
  if (v.size() != 3 || v[0] < 1 || v[1] < 1 || v[2] < 1 || v[0] > 64 || v[1] > 64 || v[2] > 64)
    throw_input_error("--grid: expected three cell counts in 1..64 (e.g. 4,4,4), got '", text, "'");
  return {v[0], v[1], v[2]};
}

}  // namespace

void register_calibrate(CLI::App& app) {
  struct Args {
    std::string model, prompts_file, output, size, grid = "4,4,4", precision = "bf16",
                                                   method = "west", mode = "e";
    std::string negative_prompt;
    bool negative_given = false, json = false;
    int64_t synth = 0, synth_seed = kFirstCalibrationSeed, frames = 0, steps = 50, seed = 0,
            samples = 64;
    double shift = 5.0, guide_scale = 5.0;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "calibrate",
      "Record a model's own tables: a WEST attention prior, or MagCache's magnitude ratios");
  cmd->add_option("--model", a->model, "model folder (as vidax generate --model)")->required();
  cmd->add_option("--method", a->method,
                  "west (attention prior, default) | magcache (step-method ratios) | teacache "
                  "(step-method polynomial)");
  cmd->add_option("--mode", a->mode, "teacache: e (default) | e0, the modulated input to fit on");
  cmd->add_option("--prompts", a->prompts_file, "calibration prompts, one per line");
  cmd->add_option("--synth", a->synth, "calibrate on N synthetic-world captions instead");
  cmd->add_option("--synth-seed", a->synth_seed,
                  "first synthetic seed (>= 8000000, kept apart from the eval suite)");
  cmd->add_option("-o,--output", a->output,
                  "file to write: a .west prior, or a MagCache table (.json)")
      ->required();
  cmd->add_option("--size", a->size, "WIDTHxHEIGHT (default: the model's official size)");
  cmd->add_option("--frames", a->frames, "frame count (default: the model's official count)");
  cmd->add_option("--steps", a->steps, "denoising steps per prompt (default 50)");
  cmd->add_option("--seed", a->seed, "noise seed of the first prompt (+1 per prompt; default 0)");
  cmd->add_option("--shift", a->shift, "flow-matching sigma shift (default 5.0)");
  cmd->add_option("--guide-scale", a->guide_scale, "classifier-free guidance scale (default 5)");
  auto* negative = cmd->add_option("--negative-prompt", a->negative_prompt,
                                   "negative prompt (default: the official one)");
  cmd->add_option("--precision", a->precision, "bf16 | fp32 for the DiT (default bf16)");
  cmd->add_option("--grid", a->grid, "normalized cell grid t,h,w (default 4,4,4)");
  cmd->add_option("--samples", a->samples, "sampled query rows per call and head (default 64)");
  cmd->add_flag("--json", a->json, "print the result as JSON on stdout");
  cmd->callback([a, negative] {
    if (a->method != "west" && a->method != "magcache" && a->method != "teacache")
      throw_input_error("--method: expected west, magcache or teacache, got '", a->method, "'");
    if (a->mode != "e" && a->mode != "e0")
      throw_input_error("--mode: expected e or e0, got '", a->mode, "'");
    const bool magcache = a->method == "magcache", teacache = a->method == "teacache";
    if (a->prompts_file.empty() == (a->synth == 0))
      throw_input_error("vidax calibrate: give exactly one of --prompts FILE and --synth N");
    if (a->synth < 0 || a->synth > 100000)
      throw_input_error("--synth: expected 1..100000 prompts, got ", a->synth);
    if (a->synth_seed < kFirstCalibrationSeed)
      throw_input_error("--synth-seed: calibration seeds start at ", kFirstCalibrationSeed,
                        " so they never overlap the evaluation suite, got ", a->synth_seed);
    if (a->steps < 1 || a->steps > 1000)
      throw_input_error("--steps: expected 1..1000, got ", a->steps);
    if (a->samples < 1 || a->samples > 65536)
      throw_input_error("--samples: expected 1..65536, got ", a->samples);
    if (a->seed < 0) throw_input_error("--seed: expected >= 0, got ", a->seed);
    const std::array<int64_t, 3> grid = parse_grid(a->grid);
    std::vector<std::string> prompts;
    if (!a->prompts_file.empty()) {
      prompts = read_prompts(a->prompts_file);
    } else {
      for (int64_t i = 0; i < a->synth; ++i)
        prompts.push_back(
            synth::caption(synth::sample_scene(static_cast<uint64_t>(a->synth_seed + i))));
    }
    GenerateOptions o;
    o.files = resolve_model_files(a->model, {});
    if (a->negative_given = negative->count() > 0; a->negative_given)
      o.negative_prompt = a->negative_prompt;
    if (!a->size.empty()) {
      const auto [w, h] = parse_size(a->size, "--size");
      o.width = w;
      o.height = h;
    }
    if (a->frames > 0) o.frames = a->frames;
    o.denoise.steps = static_cast<int>(a->steps);
    o.denoise.shift = a->shift;
    o.denoise.guide_scale = a->guide_scale;
    o.precision = wan::parse_precision(a->precision, "--precision");
    o.hash_models = false;
    auto recorder = std::make_shared<sparse::WestRecorder>(grid, a->samples, 0);
    auto ratios = std::make_shared<accel::MagRatioAccumulator>(static_cast<int>(a->steps));
    auto pairs = std::make_shared<accel::TeaCachePairs>();
    if (magcache) {
      o.accel_factory = [ratios](const accel::RunInfo& run) {
        return accel::make_magcache_calibration(run, ratios);
      };
    } else if (teacache) {
      const bool e0 = a->mode == "e0";
      o.accel_factory = [pairs, e0](const accel::RunInfo& run) {
        return accel::make_teacache_calibration(run, e0, pairs);
      };
    } else {
      o.attention_policy = recorder;
    }
    // The videos are a by-product: written to a private temporary folder, removed at the end.
    const fs::path scratch =
        fs::temp_directory_path() / ("vidax-calibrate-" + std::to_string(::getpid()));
    fs::create_directories(scratch);
    install_temp_cleanup_handlers();
    Progress progress(stderr, Progress::should_enable(false));
    double seconds = 0;
    try {
      for (size_t i = 0; i < prompts.size(); ++i) {
        o.prompt = prompts[i];
        o.seed = static_cast<uint64_t>(a->seed) + i;
        o.output = (scratch / ("clip" + std::to_string(i) + ".mp4")).string();
        o.command_line = {"vidax", "calibrate"};
        const GenerationPlan plan = plan_generation(o);
        require_fits(plan.memory, plan.available_bytes);
        const GenerationResult r = generate(o, plan, progress);
        seconds += r.total_seconds;
        std::fprintf(stderr, "vidax calibrate: prompt %zu/%zu \"%s\" (%.1f s)\n", i + 1,
                     prompts.size(), prompts[i].c_str(), r.total_seconds);
      }
    } catch (...) {
      std::error_code ec;
      fs::remove_all(scratch, ec);
      throw;
    }
    std::error_code ec;
    fs::remove_all(scratch, ec);
    const nlohmann::json provenance = {
        {"tool", "vidax calibrate"},
        {"model", a->model},
        {"prompts", prompts.size()},
        {"source", a->prompts_file.empty() ? "synth seeds " + std::to_string(a->synth_seed) + ".." +
                                                 std::to_string(a->synth_seed + a->synth - 1)
                                           : a->prompts_file},
        {"steps", a->steps},
        {"seed", a->seed},
        {"samples_per_call_head", a->samples},
        {"method", a->method},
        {"calls", magcache || teacache ? 0 : recorder->accumulator().calls()}};
    if (teacache) {
      const std::array<double, 5> c = accel::polyfit4(pairs->x, pairs->y);
      accel::write_teacache_table(a->output, c, a->mode == "e0", pairs->x.size(),
                                  provenance.dump());
      if (a->json)
        std::printf("%s\n", nlohmann::json({{"output", a->output},
                                            {"mode", a->mode},
                                            {"coefficients", c},
                                            {"points", pairs->x.size()},
                                            {"seconds", seconds}})
                                .dump(2)
                                .c_str());
      else
        std::fprintf(stderr, "vidax calibrate: wrote %s (%zu points, %zu prompts) in %.1f s\n",
                     a->output.c_str(), pairs->x.size(), prompts.size(), seconds);
      return;
    }
    if (magcache) {
      const std::vector<double> table = ratios->ratios();
      accel::write_magcache_ratios(a->output, table, static_cast<int>(a->steps), provenance.dump());
      if (a->json)
        std::printf("%s\n", nlohmann::json({{"output", a->output},
                                            {"steps", a->steps},
                                            {"prompts", prompts.size()},
                                            {"ratios", table},
                                            {"seconds", seconds}})
                                .dump(2)
                                .c_str());
      else
        std::fprintf(stderr, "vidax calibrate: wrote %s (%lld steps, %zu prompts) in %.1f s\n",
                     a->output.c_str(), static_cast<long long>(a->steps), prompts.size(), seconds);
      return;
    }
    const sparse::WestPrior prior = recorder->accumulator().prior(provenance.dump());
    sparse::write_west_prior(a->output, prior);
    if (a->json) {
      const nlohmann::json j = {
          {"output", a->output},       {"layers", prior.layers},
          {"heads", prior.heads},      {"grid", {grid[0], grid[1], grid[2]}},
          {"prompts", prompts.size()}, {"calls", recorder->accumulator().calls()},
          {"seconds", seconds}};
      std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      std::fprintf(stderr,
                   "vidax calibrate: wrote %s (%lld layers x %lld heads, %lld calls over %zu "
                   "prompts) in %.1f s\n",
                   a->output.c_str(), static_cast<long long>(prior.layers),
                   static_cast<long long>(prior.heads),
                   static_cast<long long>(recorder->accumulator().calls()), prompts.size(),
                   seconds);
    }
  });
}

}  // namespace vidax::cli
