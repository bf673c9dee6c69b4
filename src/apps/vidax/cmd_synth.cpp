// `vidax synth`: export a synthetic video dataset (vidax-tiny's training data), or measure the
// prompt-adherence analyzer on ground-truth clips (--analyze-ground-truth).
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "apps/vidax/commands.h"
#include "synth/analyzer.h"
#include "synth/dataset.h"
#include "synth/perturb.h"
#include "synth/render.h"

namespace vidax::cli {
namespace {

struct SynthArgs {
  std::string out;
  int64_t count = 0;
  uint64_t seed = 0;
  std::string size = "256x256";
  int64_t frames = 17;
  int64_t shard_size = 64;
  int64_t preview = 0;
  bool analyze = false;
  std::string perturb = "none";
  std::string layout = "random";
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void analyze_ground_truth(const SynthArgs& a, const synth::ClipGeometry& g, synth::Layout layout) {
  const auto start = std::chrono::steady_clock::now();
  synth::AdherenceTally tally;
  int listed = 0;
  for (int64_t i = 0; i < a.count; ++i) {
    const synth::SceneSpec s = synth::sample_scene(a.seed + static_cast<uint64_t>(i), layout);
    Tensor frames = synth::render_rgb8(s, g);  // [F, H, W, 3]
    if (a.perturb != "none")
      frames = synth::perturb(synth::rgb8_to_video(frames), a.perturb, s.seed, "--perturb");
    const synth::AdherenceScore sc = synth::score(s, frames);
    tally.add(sc);
    if (!sc.overall && listed++ < 10) {
      synth::SceneAttributes found;
      found.background = sc.analysis.background;
      for (const auto& o : sc.analysis.objects) found.objects.push_back(o.attributes);
      std::printf("  wrong: seed %llu \"%s\": found %s\n", static_cast<unsigned long long>(s.seed),
                  synth::caption(s).c_str(), synth::describe(found).c_str());
    }
  }
  std::printf(
      "analyzer on %lld ground-truth clips (seeds %llu..%llu, %lldx%lld, %lld frames, "
      "perturb %s, %s layout), %.1f s:\n  %s\n",
      static_cast<long long>(a.count), static_cast<unsigned long long>(a.seed),
      static_cast<unsigned long long>(a.seed + static_cast<uint64_t>(a.count) - 1),
      static_cast<long long>(g.width), static_cast<long long>(g.height),
      static_cast<long long>(g.frames), a.perturb.c_str(),
      std::string(synth::layout_name(layout)).c_str(), seconds_since(start),
      tally.summary().c_str());
}

void run_synth(const SynthArgs& a) {
  const auto [w, h] = parse_size(a.size, "--size");
  const synth::ClipGeometry g{w, h, a.frames};
  const synth::Layout layout = synth::parse_layout(a.layout, "--layout");
  if (a.analyze) {
    if (a.count <= 0)
      throw_input_error("--count: expected a positive number of clips, got ", a.count);
    synth::check_geometry(g, "--size/--frames");
    analyze_ground_truth(a, g, layout);
    return;
  }
  if (a.out.empty()) throw_input_error("--out: required (the dataset folder to write)");
  const auto start = std::chrono::steady_clock::now();
  synth::DatasetOptions o;
  o.out_dir = a.out;
  o.count = a.count;
  o.seed = a.seed;
  o.geometry = g;
  o.shard_size = a.shard_size;
  o.preview = a.preview;
  o.layout = layout;
  const auto summary = synth::write_dataset(o, [&](int64_t done) {
    std::printf("  %lld / %lld clips\n", static_cast<long long>(done),
                static_cast<long long>(a.count));
    std::fflush(stdout);
  });
  std::printf(
      "wrote %lld clips (%lldx%lld, %lld frames, %lld DiT tokens each) to %s: %zu files, "
      "%.1f s\n",
      static_cast<long long>(summary.clips), static_cast<long long>(w), static_cast<long long>(h),
      static_cast<long long>(a.frames),
      static_cast<long long>(synth::dit_tokens(g, "--size/--frames")), a.out.c_str(),
      summary.files.size(), seconds_since(start));
}

}  // namespace

void register_synth(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "synth", "Write a synthetic video dataset, or measure the analyzer on ground truth");
  auto a = std::make_shared<SynthArgs>();
  cmd->add_option("--out", a->out, "dataset folder (created if missing)");
  cmd->add_option("--count", a->count, "number of clips")->required();
  cmd->add_option("--seed", a->seed, "seed of the first clip (clip i has seed + i)");
  cmd->add_option("--size", a->size, "WIDTHxHEIGHT, multiples of 16 (default 256x256)");
  cmd->add_option("--frames", a->frames, "frames per clip, 4k+1 (default 17)");
  cmd->add_option("--shard-size", a->shard_size, "clips per safetensors shard (default 64)");
  cmd->add_option("--preview", a->preview, "write preview.png with this many clips");
  cmd->add_flag("--analyze-ground-truth", a->analyze,
                "score the analyzer on rendered clips instead of writing a dataset");
  cmd->add_option("--perturb", a->perturb,
                  "with --analyze-ground-truth: none, noise, blur or jpeg (default none)");
  cmd->add_option("--layout", a->layout,
                  "random (default), canonical (object placement fixed by the caption) or "
                  "large (larger objects, shorter travel) (docs/synthetic-world.md)");
  cmd->fallthrough();
  cmd->callback([a] { run_synth(*a); });
}

}  // namespace vidax::cli
