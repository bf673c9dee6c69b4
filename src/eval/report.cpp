#include "eval/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <vector>

namespace vidax::eval {
namespace {

using nlohmann::json;

json number_or_null(std::optional<double> v) {
  if (!v || !std::isfinite(*v)) return nullptr;
  return *v;
}

json adherence_json(const synth::AdherenceScore& s) {
  return {{"overall", s.overall}, {"color", s.color},           {"shape", s.shape},
          {"motion", s.motion},   {"background", s.background}, {"count", s.count}};
}

std::string cell(const char* f, std::optional<double> v) {
  if (!v) return "-";
  if (std::isinf(*v)) return "inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, *v);
  return buf;
}

std::string pad(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

// null unless the run collected attention records (a dense configuration records none).
json attention_metrics_json(const EvalReport& r, const Aggregate& a) {
  if (!r.attention_metrics || !a.attention_rel_l2) return nullptr;
  json per = json::array();
  for (const auto& s : a.attention_by_layer_step)
    per.push_back({{"layer", s.layer},
                   {"step", s.step},
                   {"calls", s.calls},
                   {"density", s.density},
                   {"rel_l2", s.rel_l2},
                   {"recall", s.recall}});
  return {{"density_mean", *a.attention_density},
          {"rel_l2_mean", *a.attention_rel_l2},
          {"recall_mean", *a.attention_recall},
          {"speed_includes_dense_shadow", true},
          {"per_layer_step", std::move(per)}};
}

}  // namespace

Aggregate aggregate(const EvalReport& r) {
  Aggregate a;
  a.clips = static_cast<int64_t>(r.clips.size());
  if (r.clips.empty()) return a;
  std::vector<double> steps;
  double psnr_sum = 0, ssim_sum = 0, temporal_sum = 0, temporal_ref_sum = 0, clip_seconds = 0;
  double denoise = 0, attention = 0, work = 0, timed_denoise = 0, reference_denoise = 0;
  int64_t fidelity_clips = 0;
  double psnr_min = std::numeric_limits<double>::infinity(), ssim_min = 1e9;
  for (const ClipResult& c : r.clips) {
    if (c.adherence) a.adherence.add(*c.adherence);
    if (c.psnr) {
      ++fidelity_clips;
      psnr_sum += *c.psnr;
      psnr_min = std::min(psnr_min, *c.psnr);
      ssim_sum += *c.ssim;
      ssim_min = std::min(ssim_min, *c.ssim);
      a.identical_clips += std::isinf(*c.psnr) ? 1 : 0;
      temporal_ref_sum += *c.temporal_reference;
    }
    temporal_sum += c.temporal;
    steps.push_back(c.seconds_per_step);
    clip_seconds += c.total_seconds;
    denoise += c.denoise_seconds;
    attention += c.attention_seconds;
    work += c.work_fraction;
    if (c.reference_denoise_seconds) {
      timed_denoise += c.denoise_seconds;
      reference_denoise += *c.reference_denoise_seconds;
    }
  }
  const double n = static_cast<double>(a.clips);
  if (a.adherence.clips > 0) a.adherence_overall = a.adherence.rate(a.adherence.overall);
  if (fidelity_clips > 0) {
    a.psnr_mean = psnr_sum / static_cast<double>(fidelity_clips);
    a.psnr_min = psnr_min;
    a.ssim_mean = ssim_sum / static_cast<double>(fidelity_clips);
    a.ssim_min = ssim_min;
    a.temporal_reference = temporal_ref_sum / static_cast<double>(fidelity_clips);
  } else if (r.mode == "generate") {
    a.temporal_reference = temporal_sum / n;  // the reference is this configuration
  }
  a.temporal = temporal_sum / n;
  if (r.mode == "generate") {
    double sum = 0;
    for (double s : steps) sum += s;
    a.seconds_per_step = sum / n;
    std::sort(steps.begin(), steps.end());
    const size_t m = steps.size() / 2;
    a.seconds_per_step_median = steps.size() % 2 ? steps[m] : 0.5 * (steps[m - 1] + steps[m]);
    a.seconds_per_clip = clip_seconds / n;
    if (denoise > 0) a.attention_share = attention / denoise;
    a.work_fraction = work / n;
    if (reference_denoise > 0) a.wall_fraction = timed_denoise / reference_denoise;
  }
  std::map<std::pair<int64_t, int64_t>, Aggregate::AttentionCallStat> by_call;  // (step, layer)
  double density = 0, rel_l2 = 0, recall = 0;
  int64_t records = 0;
  for (const ClipResult& c : r.clips)
    for (const sparse::AttentionRecord& rec : c.attention_records) {
      auto& s = by_call[{rec.step, rec.layer}];
      s.layer = rec.layer;
      s.step = rec.step;
      ++s.calls;
      s.density += rec.density;
      s.rel_l2 += rec.rel_l2;
      s.recall += rec.recall;
      density += rec.density;
      rel_l2 += rec.rel_l2;
      recall += rec.recall;
      ++records;
    }
  if (records > 0) {
    const double k = static_cast<double>(records);
    a.attention_density = density / k;
    a.attention_rel_l2 = rel_l2 / k;
    a.attention_recall = recall / k;
    for (auto& [key, s] : by_call) {
      const double m = static_cast<double>(s.calls);
      s.density /= m;
      s.rel_l2 /= m;
      s.recall /= m;
      a.attention_by_layer_step.push_back(s);
    }
  }
  return a;
}

json report_json(const EvalReport& r) {
  const Aggregate a = aggregate(r);
  json clips = json::array();
  for (const ClipResult& c : r.clips) {
    json j = {{"prompt", c.prompt},
              {r.mode == "generate" ? "seed" : "scene_seed", c.seed},
              {"temporal_change", c.temporal}};
    if (c.adherence) {
      j["adherence"] = adherence_json(*c.adherence);
      j["found"] = c.found;
    } else {
      j["adherence"] = nullptr;
    }
    if (r.mode == "generate") {
      j["psnr"] = number_or_null(c.psnr);
      j["ssim"] = number_or_null(c.ssim);
      j["identical_to_reference"] = c.psnr ? json(std::isinf(*c.psnr)) : json(nullptr);
      j["temporal_change_reference"] = number_or_null(c.temporal_reference);
      j["reference_from_cache"] = c.reference_from_cache;
      j["seconds_per_step"] = c.seconds_per_step;
      j["denoise_seconds"] = c.denoise_seconds;
      j["attention_seconds"] = c.attention_seconds;
      j["seconds"] = c.total_seconds;
      j["work_fraction"] = c.work_fraction;
      j["model_calls"] = c.model_calls;
      j["block_stack_runs"] = c.block_stack_runs;
      if (!c.accel_details.is_null()) j["accel_details"] = c.accel_details;
      j["reference_denoise_seconds"] = number_or_null(c.reference_denoise_seconds);
    }
    clips.push_back(std::move(j));
  }
  const auto& t = a.adherence;
  json by_attribute = nullptr;
  if (t.clips > 0)
    by_attribute = {{"color", t.rate(t.color)},   {"shape", t.rate(t.shape)},
                    {"motion", t.rate(t.motion)}, {"background", t.rate(t.background)},
                    {"count", t.rate(t.count)},   {"overall", t.rate(t.overall)}};
  json out = {{"mode", r.mode},
              {"model", r.model_name},
              {"suite", r.suite_name},
              {"prompts", r.prompts},
              {"seeds", r.seeds},
              {"clips", a.clips},
              {"adherence", number_or_null(a.adherence_overall)},
              {"adherence_by_attribute", by_attribute},
              {"adherence_clips", t.clips},
              {"temporal_change", a.temporal},
              {"wall_seconds", r.wall_seconds}};
  if (r.mode == "generate") {
    json ratio = nullptr;  // a still reference has no ratio
    if (a.temporal_reference && *a.temporal_reference > 0)
      ratio = a.temporal / *a.temporal_reference;
    out.update(
        json{{"config", {{"spec", r.config_spec}, {"canonical", r.config.canonical()}}},
             {"against", {{"spec", r.reference_spec}, {"canonical", r.reference.canonical()}}},
             {"same_as_reference", r.same_as_reference},
             {"psnr_mean", number_or_null(a.psnr_mean)},
             {"psnr_min", number_or_null(a.psnr_min)},
             {"ssim_mean", number_or_null(a.ssim_mean)},
             {"ssim_min", number_or_null(a.ssim_min)},
             {"identical_clips", a.identical_clips},
             {"temporal_change_reference", number_or_null(a.temporal_reference)},
             {"temporal_ratio", ratio},
             {"seconds_per_step", a.seconds_per_step},
             {"seconds_per_step_median", a.seconds_per_step_median},
             {"seconds_per_clip", a.seconds_per_clip},
             {"attention_share", number_or_null(a.attention_share)},
             {"work_fraction", a.work_fraction},
             {"wall_fraction", number_or_null(a.wall_fraction)},
             {"attention_metrics", attention_metrics_json(r, a)},
             {"cache",
              {{"dir", r.cache_dir.empty() ? json(nullptr) : json(r.cache_dir)},
               {"reference_generated", r.reference_generated},
               {"reference_cached", r.reference_cached}}}});
  } else {
    out["size"] = std::to_string(r.config.width) + "x" + std::to_string(r.config.height);
    out["frames"] = r.config.frames;
  }
  out["per_clip"] = std::move(clips);
  return out;
}

std::string report_table(const EvalReport& r, bool per_clip) {
  const Aggregate a = aggregate(r);
  std::string s;
  char buf[512];
  if (per_clip) {
    std::snprintf(buf, sizeof buf, "%-8s %-6s %-9s %-8s %-7s %-7s  %s\n",
                  r.mode == "generate" ? "seed" : "scene", "adher.", "PSNR", "SSIM", "s/clip",
                  "temporal", "prompt");
    s += buf;
    for (const ClipResult& c : r.clips) {
      std::snprintf(
          buf, sizeof buf, "%-8s %-6s %-9s %-8s %-7s %-7s  %s\n", std::to_string(c.seed).c_str(),
          c.adherence ? (c.adherence->overall ? "ok" : "wrong") : "-", cell("%.2f", c.psnr).c_str(),
          cell("%.4f", c.ssim).c_str(),
          cell("%.2f", c.total_seconds > 0 ? std::optional<double>(c.total_seconds) : std::nullopt)
              .c_str(),
          cell("%.4f", c.temporal).c_str(), c.prompt.c_str());
      s += buf;
      if (c.adherence && !c.adherence->overall) s += "         found: " + c.found + "\n";
    }
    s += "\n";
  }
  const auto pct = [](std::optional<double> v) {
    return cell("%.1f%%", v ? std::optional<double>(*v * 100) : std::nullopt);
  };
  if (r.mode == "ground-truth") {
    s += "ground truth (" + r.suite_name + " suite, " + std::to_string(r.config.width) + "x" +
         std::to_string(r.config.height) + "x" + std::to_string(r.config.frames) + ")\n";
    s += pad("clips", 7) + "adherence\n";
    s += pad(std::to_string(a.clips), 7) + pct(a.adherence_overall) + "\n";
  } else {
    const std::string temporal =
        cell("%.4f", a.temporal) + " / " + cell("%.4f", a.temporal_reference);
    s += pad("config", 24) + pad("against", 12) + pad("clips", 7) + pad("adherence", 11) +
         pad("PSNR mean", 11) + pad("PSNR min", 10) + pad("SSIM mean", 11) +
         pad("temporal/ref", 17) + pad("s/step", 8) + pad("s/clip", 8) + "attention\n";
    s += pad(r.config_spec, 24) + pad(r.reference_spec, 12) + pad(std::to_string(a.clips), 7) +
         pad(pct(a.adherence_overall), 11) + pad(cell("%.2f", a.psnr_mean), 11) +
         pad(cell("%.2f", a.psnr_min), 10) + pad(cell("%.4f", a.ssim_mean), 11) +
         pad(temporal, 17) + pad(cell("%.3f", a.seconds_per_step), 8) +
         pad(cell("%.2f", a.seconds_per_clip), 8) + pct(a.attention_share) + "\n";
  }
  if (r.mode == "generate" && r.config.accel != "none")
    s += "  step method " + r.config.accel + ": " + pct(a.work_fraction) +
         " of the dense work, wall clock " +
         (a.wall_fraction ? pct(a.wall_fraction) + " of the reference's denoising"
                          : std::string("against a cached reference: not measured (--no-cache)")) +
         "\n";
  if (a.adherence.clips > 0) s += "  adherence by attribute: " + a.adherence.summary() + "\n";
  if (a.attention_rel_l2)
    s += "  attention vs dense: density " + cell("%.3f", a.attention_density) + ", relative L2 " +
         cell("%.4f", a.attention_rel_l2) + ", recall " + cell("%.4f", a.attention_recall) +
         " (means over " + std::to_string(a.attention_by_layer_step.size()) +
         " layer x step cells; speed includes the dense shadow runs)\n";
  return s;
}

}  // namespace vidax::eval
