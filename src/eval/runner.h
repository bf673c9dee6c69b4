// Running an evaluation: every prompt x seed of a suite is generated with the configuration
// under test (timed, with the profiler on to measure the share of attention), judged by the
// synthetic world's analyzer where the prompt carries attributes, and compared frame by frame
// with the same prompt and seed generated with the reference configuration. Reference clips
// come from the frame cache when present (every generated clip is stored there, so a later run
// against this configuration is free); a configuration equal to its reference is generated
// once and has no fidelity numbers. The ground-truth mode scores the synthetic world's own
// renders of the suite's scenes through the same analyzer path.
//
// Not thread-safe (drives the models on the calling thread; kernels use OpenMP; toggles the
// global profiler).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/config_spec.h"
#include "eval/suite.h"
#include "pipeline/model_files.h"
#include "sparse/sparse_attention.h"
#include "synth/analyzer.h"

namespace vidax::eval {

struct EvalRequest {
  ModelFiles files;
  std::string model_name;       // shown in reports (the folder)
  std::string negative_prompt;  // used for every clip (vidax-tiny: "")
  EvalConfig config, reference;
  std::string config_spec = "default", reference_spec = "default";  // as the user wrote them
  Suite suite;
  std::string cache_dir;  // empty: no cache
  // Per self-attention call, the error of the configuration's attention against dense and the
  // attention mass its mask keeps (recall). Runs dense attention beside every sparse call, so
  // the speed figures of such a run include that extra work.
  bool attention_metrics = false;
  std::function<void(const std::string&)> log;  // one line per clip (may be empty)
};

struct ClipResult {
  std::string prompt;
  uint64_t seed = 0;
  std::optional<synth::AdherenceScore> adherence;  // prompts with attributes only
  std::string found;                               // what the analyzer saw (describe())
  // Fidelity to the reference; nullopt when the configuration is the reference. PSNR is +inf
  // for identical frames.
  std::optional<double> psnr, ssim;
  double temporal = 0;                       // temporal_change of this clip
  std::optional<double> temporal_reference;  // of the reference clip (nullopt: same config)
  bool reference_from_cache = false;
  // Speed of this configuration (not measured in ground-truth mode).
  double seconds_per_step = 0;   // mean wall time of one denoising step (both CFG branches)
  double denoise_seconds = 0;    // the denoising steps alone (steps * seconds_per_step)
  double attention_seconds = 0;  // of which in attention (profiler "attention.*" scopes)
  double total_seconds = 0;      // end to end: text encoding, denoising, decoding, model loads
  // Step method (accel): the share of the dense DiT work this clip did, its model calls, and
  // the denoising seconds of its reference clip when that was generated in this run (for the
  // wall-clock fraction; nullopt when it came from the cache or is this configuration).
  double work_fraction = 1;
  int64_t model_calls = 0, block_stack_runs = 0;
  nlohmann::json accel_details;  // the step method's own facts (StepReport::details), or null
  std::optional<double> reference_denoise_seconds;
  // With EvalRequest::attention_metrics and a sparse configuration: one record per
  // self-attention call (layer, step, CFG branch, density, relative L2 error, recall).
  std::vector<sparse::AttentionRecord> attention_records;
};

struct EvalReport {
  std::string mode = "generate";  // or "ground-truth"
  std::string model_name, suite_name;
  int64_t prompts = 0;
  std::vector<uint64_t> seeds;
  std::string config_spec, reference_spec;
  EvalConfig config, reference;
  bool same_as_reference = true;
  bool attention_metrics = false;  // records were collected (speed includes dense shadow runs)
  std::string cache_dir;
  int reference_generated = 0, reference_cached = 0;
  std::vector<ClipResult> clips;
  double wall_seconds = 0;
};

// InputError from the pipeline for a configuration the model cannot run (sizes, memory, an
// unknown attention method), before any clip is generated.
EvalReport run_eval(const EvalRequest& request);

// `geometry` supplies width, height and frames. Prompts without a scene (prompt files) are an
// InputError: there is nothing to render.
EvalReport run_ground_truth(const Suite& suite, const EvalConfig& geometry,
                            const std::function<void(const std::string&)>& log);

// The analyzer on one clip (U8 [F, H, W, 3]): the path both modes share.
synth::AdherenceScore score_clip(const synth::SceneAttributes& expected, const Tensor& frames);

}  // namespace vidax::eval
