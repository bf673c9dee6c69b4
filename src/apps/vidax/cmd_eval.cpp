// `vidax eval`: the quality harness every acceleration method is judged with. Generates a fixed
// suite of prompts x seeds with a configuration and reports prompt adherence (the synthetic
// world's analyzer), fidelity to a reference configuration (PSNR / SSIM), temporal consistency
// and speed. With no arguments it evaluates the shipped vidax-tiny at its default settings.
//   vidax eval [--config SPEC] [--against SPEC] [--suite default|ci | --prompts FILE] [--json]
//   vidax eval --ground-truth       (the analyzer on the synthetic world's own renders)
// See docs/eval.md.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/vidax/commands.h"
#include "core/error.h"
#include "eval/config_spec.h"
#include "eval/frame_cache.h"
#include "eval/report.h"
#include "eval/runner.h"
#include "eval/suite.h"
#include "pipeline/tiny_defaults.h"

namespace vidax::cli {
namespace {

namespace fs = std::filesystem;

struct EvalArgs {
  std::string model, config = "default", against = "default", suite = "default", prompts;
  std::string negative_prompt, cache, defaults = "auto";
  bool negative_given = false, no_cache = false, json = false, ground_truth = false;
  bool per_clip = false, quiet = false, attention_metrics = false;
  int seeds = 0;  // 0: the suite's own
};

// True when DIR/config.json names the model vidax-tiny ("vidax_model", written by the
// training export). A missing or unreadable config is not vidax-tiny; the model loader reports
// those problems itself.
bool config_names_tiny(const std::string& dir) {
  std::ifstream in(fs::path(dir) / "config.json");
  if (!in) return false;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("vidax_model") || !j["vidax_model"].is_string()) return false;
  return j["vidax_model"].get<std::string>() == "vidax-tiny";
}

// vidax-tiny (no --model, a folder whose config says so, or the folder the demo would use)
// gets the demo's settings and the empty negative prompt it was trained with; any other model
// the official Wan 2.1 defaults.
bool is_tiny(const EvalArgs& a) {
  if (a.defaults == "tiny") return true;
  if (a.defaults == "wan2.1") return false;
  if (a.defaults != "auto")
    throw_input_error("--defaults: expected auto, tiny or wan2.1, got '", a.defaults, "'");
  if (a.model.empty()) return true;
  if (config_names_tiny(a.model)) return true;
  try {
    std::error_code ec;
    return fs::equivalent(a.model, find_tiny_model(""), ec);
  } catch (const InputError&) {
    return false;  // no shipped vidax-tiny around: not it
  }
}

void log_line(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

void run_eval_command(const EvalArgs& a) {
  if (!a.prompts.empty() && a.suite != "default")
    throw_input_error("--prompts: give either --suite or --prompts, not both");
  const bool tiny = is_tiny(a);
  const eval::EvalConfig defaults = tiny ? eval::tiny_defaults() : eval::wan21_defaults();
  const eval::EvalConfig config = eval::parse_config_spec(a.config, defaults, "--config");
  // The reference is at the configuration's size and length unless --against says otherwise:
  // fidelity compares frames one to one.
  eval::EvalConfig reference_defaults = defaults;
  reference_defaults.width = config.width;
  reference_defaults.height = config.height;
  reference_defaults.frames = config.frames;
  const eval::EvalConfig reference =
      eval::parse_config_spec(a.against, reference_defaults, "--against");
  eval::Suite suite = a.prompts.empty() ? eval::builtin_suite(a.suite)
                                        : eval::prompt_file_suite(a.prompts, a.seeds ? a.seeds : 1);
  if (a.seeds != 0) suite.seeds = eval::suite_seeds(a.seeds);
  std::function<void(const std::string&)> log;
  if (!a.quiet) log = log_line;

  eval::EvalReport report;
  if (a.ground_truth) {
    report = eval::run_ground_truth(suite, config, log);
  } else {
    eval::EvalRequest rq;
    rq.model_name = tiny && a.model.empty() ? find_tiny_model("") : a.model;
    rq.files = resolve_model_files(rq.model_name, {});
    rq.negative_prompt = a.negative_given ? a.negative_prompt : std::string(tiny::kNegativePrompt);
    if (!a.negative_given && !tiny) rq.negative_prompt = kWanDefaultNegativePrompt;
    rq.config = config;
    rq.reference = reference;
    rq.config_spec = a.config;
    rq.reference_spec = a.against;
    rq.suite = std::move(suite);
    rq.attention_metrics = a.attention_metrics;
    rq.cache_dir =
        a.no_cache ? std::string() : (a.cache.empty() ? eval::default_cache_dir() : a.cache);
    rq.log = log;
    report = eval::run_eval(rq);
  }
  if (a.json) {
    std::printf("%s\n", eval::report_json(report)
                            .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                            .c_str());
  } else {
    std::printf("%s", eval::report_table(report, a.per_clip).c_str());
  }
}

}  // namespace

void register_eval(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  auto* cmd = app.add_subcommand(
      "eval", "Quality harness: adherence, fidelity to a reference, temporal consistency, speed");
  cmd->add_option("--model", a->model,
                  "model folder (default: the shipped vidax-tiny, found as vidax demo does)");
  cmd->add_option("--config", a->config,
                  "configuration under test: default, or key=value,... with keys steps, shift, "
                  "guide, sampler, precision, size, frames, attention");
  cmd->add_option("--against", a->against, "reference configuration (default: default)");
  cmd->add_option("--suite", a->suite, "default (24 prompts x 2 seeds) or ci (3 x 1)");
  cmd->add_option("--prompts", a->prompts,
                  "prompt file, one per line (other models; adherence only for captions of the "
                  "synthetic world)");
  cmd->add_option("--seeds", a->seeds, "generation seeds per prompt (42, 43, ...)");
  cmd->add_option("--negative-prompt", a->negative_prompt,
                  "negative prompt (default: \"\" for vidax-tiny, the official one otherwise)")
      ->each([a](const std::string&) { a->negative_given = true; });
  cmd->add_option("--defaults", a->defaults,
                  "what 'default' means: auto (vidax-tiny's demo settings for vidax-tiny, else "
                  "Wan 2.1's), tiny or wan2.1");
  cmd->add_option("--cache", a->cache,
                  "folder for cached reference clips (default build/eval-cache in a source tree, "
                  "else $XDG_CACHE_HOME/vidax/eval)");
  cmd->add_flag("--no-cache", a->no_cache, "neither read nor write cached clips");
  cmd->add_flag("--ground-truth", a->ground_truth,
                "score the synthetic world's own renders of the suite (validates the analyzer)");
  cmd->add_flag("--json", a->json, "print one JSON object on stdout");
  cmd->add_flag("--attention-metrics", a->attention_metrics,
                "per layer and step: relative L2 error of the attention output against dense and "
                "the attention mass the mask keeps (runs dense beside every sparse call)");
  cmd->add_flag("--per-clip", a->per_clip, "table: one line per clip before the summary");
  cmd->add_flag("--quiet", a->quiet, "no progress lines on stderr");
  cmd->callback([a] { run_eval_command(*a); });
}

}  // namespace vidax::cli
