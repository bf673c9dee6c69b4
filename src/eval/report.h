// Summaries of an evaluation: the aggregate numbers (adherence per attribute and overall,
// fidelity mean / worst clip, temporal change against the reference's, speed and the share of
// attention), as one JSON object (`vidax eval --json`, fields in docs/eval.md) or a readable
// table (one header and one row per configuration, optionally one line per clip).
//
// Pure functions; safe to call from any number of threads.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/runner.h"

namespace vidax::eval {

struct Aggregate {
  int64_t clips = 0;
  synth::AdherenceTally adherence;          // over the clips that have attributes
  std::optional<double> adherence_overall;  // nullopt when no clip has attributes
  // Fidelity; nullopt when the configuration is the reference. Means are over clips; PSNR +inf
  // when every clip (mean: any clip) is identical to its reference.
  std::optional<double> psnr_mean, psnr_min, ssim_mean, ssim_min;
  int64_t identical_clips = 0;
  double temporal = 0;                       // mean temporal_change of the clips
  std::optional<double> temporal_reference;  // of the reference clips
  double seconds_per_step = 0, seconds_per_step_median = 0, seconds_per_clip = 0;
  std::optional<double> attention_share;  // attention seconds / denoising seconds
  // Step methods: the mean share of the dense DiT work done, and the denoising seconds over
  // the reference's (clips whose reference was generated in this run; nullopt otherwise).
  double work_fraction = 1;
  std::optional<double> wall_fraction;
  // Attention metrics (EvalRequest::attention_metrics): means over every recorded call of every
  // clip, and per (layer, step) over clips and CFG branches.
  struct AttentionCallStat {
    int64_t layer = 0, step = 0, calls = 0;
    double density = 0, rel_l2 = 0, recall = 0;
  };
  std::optional<double> attention_density, attention_rel_l2, attention_recall;
  std::vector<AttentionCallStat> attention_by_layer_step;  // sorted by (step, layer)
};

Aggregate aggregate(const EvalReport& report);

// Non-finite numbers (identical clips' PSNR) are written as null.
nlohmann::json report_json(const EvalReport& report);
// Header + one row (+ one line of adherence per attribute); with per_clip, a line per clip
// first.
std::string report_table(const EvalReport& report, bool per_clip);

}  // namespace vidax::eval
