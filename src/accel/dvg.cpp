#include "accel/dvg.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "sampling/torch_randn.h"
#include "sparse/policy_options.h"

namespace vidax::accel {
namespace {

int64_t tokens_of(const wan::DitConfig& c, const LatentGrid& g) {
  return (g[0] / c.patch[0]) * (g[1] / c.patch[1]) * (g[2] / c.patch[2]);
}

}  // namespace

ContentMeasures content_measures(const Tensor& x0_in) {
  const Tensor x0 = x0_in.to(DType::kF32).contiguous();
  VIDAX_CHECK(x0.rank() == 4, "dvg: x0 must be [C, F, H, W]");
  const int64_t C = x0.dim(0), F = x0.dim(1), H = x0.dim(2), W = x0.dim(3);
  const int64_t plane = H * W, per_channel = F * plane;
  const float* p = x0.data<float>();
  // Serial sums in double: the same numbers on every rank and for every thread count.
  double spread = 0, motion = 0, detail = 0;
  int64_t motion_n = 0;
  for (int64_t c = 0; c < C; ++c) {
    const float* xc = p + c * per_channel;
    double mean = 0;
    for (int64_t i = 0; i < per_channel; ++i) mean += xc[i];
    mean /= static_cast<double>(per_channel);
    for (int64_t i = 0; i < per_channel; ++i) spread += std::fabs(xc[i] - mean);
    for (int64_t f = 1; f + 1 < F; ++f)
      for (int64_t i = 0; i < plane; ++i) {
        motion += std::fabs(static_cast<double>(xc[(f + 1) * plane + i]) - xc[f * plane + i]);
        ++motion_n;
      }
    for (int64_t f = 0; f < F; ++f) {
      const float* xf = xc + f * plane;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          double box = 0;
          for (int64_t dh = -1; dh <= 1; ++dh)
            for (int64_t dw = -1; dw <= 1; ++dw) {
              const int64_t hh = std::clamp<int64_t>(h + dh, 0, H - 1);
              const int64_t ww = std::clamp<int64_t>(w + dw, 0, W - 1);
              box += xf[hh * W + ww];
            }
          detail += std::fabs(xf[h * W + w] - box / 9.0);
        }
    }
  }
  const double n = static_cast<double>(C * per_channel);
  const double scale = spread / n;
  ContentMeasures m;
  if (!(scale > 0)) return {0, 0};  // a constant prediction: nothing moves, no detail
  m.motion = motion_n > 0 ? (motion / static_cast<double>(motion_n)) / scale
                          : std::numeric_limits<double>::infinity();
  m.detail = (detail / n) / scale;
  return m;
}

std::string choose_reduction(const ContentMeasures& m, double max_motion, double max_detail,
                             bool can_reduce_time, bool can_reduce_space) {
  const bool time = can_reduce_time && m.motion <= max_motion;
  const bool space = can_reduce_space && m.detail <= max_detail;
  return time && space ? "joint" : time ? "time" : space ? "space" : "full";
}

Dvg::Dvg(RunInfo run, DvgOptions o) : StepMethod(std::move(run)), o_(std::move(o)) {
  const int steps = run_.steps;
  switch_step_ = o_.mode == "full" ? 0
                                   : std::clamp(static_cast<int>(std::lround(o_.switch_at * steps)),
                                                0, steps - 1);
  if (o_.switch_at > 0 && o_.mode != "full" && switch_step_ == 0 && steps > 1) switch_step_ = 1;
  probe_steps_ = o_.mode == "auto" && switch_step_ > 0
                     ? std::clamp(static_cast<int>(std::lround(o_.probe * steps)), 1, switch_step_)
                     : 0;
}

std::string Dvg::name() const {
  std::string s = "dvg:mode=" + o_.mode + ",switch=" + spec_number(o_.switch_at) +
                  ",scale=" + spec_number(o_.scale) + ",time=" + spec_number(o_.time);
  if (o_.mode == "auto")
    s += ",probe=" + spec_number(o_.probe) + ",motion=" + spec_number(o_.motion) +
         ",detail=" + spec_number(o_.detail);
  if (o_.shift > 0) s += ",shift=" + spec_number(o_.shift);
  if (!o_.keep_noise) s += ",noise=fresh";
  return s;
}

LatentGrid Dvg::reduced(const std::string& reduction, const LatentGrid& full) const {
  LatentGrid g = full;
  const auto& patch = run_.dit.patch;
  if (reduction == "space" || reduction == "joint")
    for (int d = 1; d <= 2; ++d) {
      const int64_t p = patch[static_cast<size_t>(d)];
      const int64_t scaled =
          static_cast<int64_t>(std::floor(static_cast<double>(full[static_cast<size_t>(d)]) *
                                          o_.scale / static_cast<double>(p))) *
          p;
      g[static_cast<size_t>(d)] = std::max(p, scaled);
    }
  if ((reduction == "time" || reduction == "joint") && full[0] > 1 && patch[0] == 1) {
    const int64_t kept =
        static_cast<int64_t>(std::ceil(static_cast<double>(full[0] - 1) * o_.time));
    g[0] = 1 + std::max<int64_t>(kept, 1);
  }
  return g;
}

void Dvg::plan_stages(const LatentGrid& full) {
  full_ = full;
  stages_.clear();
  const std::string first = o_.mode == "auto" ? "joint" : o_.mode;
  current_ = switch_step_ > 0 ? reduced(first, full) : full;
  stages_.push_back({0, current_});
}

Tensor Dvg::start_latent(const Tensor& noise) {
  plan_stages(grid_of(noise));
  if (o_.keep_noise && switch_step_ > 0) noise_ = noise.to(DType::kF32).contiguous();
  if (current_ == full_) return noise;
  return o_.keep_noise ? subsample_noise(noise, current_) : crop_latent(noise, current_);
}

StageSwitch Dvg::make_switch(const LatentGrid& grid, double shift, int64_t channels) {
  StageSwitch s;
  s.grid = grid;
  s.shift = shift;
  if (o_.keep_noise) {
    s.noise = grid == full_ ? noise_ : subsample_noise(noise_, grid);
  } else {
    // Fresh noise per stage from the run's seed (mixed, so that it is not the noise of
    // seed + 1, the next video of a batch).
    const uint64_t seed =
        sparse::mix64(run_.seed ^ 0x6476672d72656e6fULL) + static_cast<uint64_t>(stages_.size());
    s.noise = torch_randn(seed, Shape{channels, grid[0], grid[1], grid[2]});
  }
  return s;
}

std::optional<StageSwitch> Dvg::stage_after(int step, const Tensor& x, const Tensor& prediction,
                                            float sigma) {
  VIDAX_CHECK(full_[0] > 0, "dvg: stage_after before start_latent");
  if (current_ == full_) return std::nullopt;
  LatentGrid next = current_;
  double shift = 0;
  if (probe_steps_ > 0 && step == probe_steps_ - 1 && step + 1 < switch_step_) {
    measured_ = content_measures(data_prediction(x, prediction, sigma));
    measured_valid_ = true;
    choice_ = choose_reduction(measured_, o_.motion, o_.detail, reduced("time", full_) != full_,
                               reduced("space", full_) != full_);
    next = reduced(choice_, full_);
  }
  if (step == switch_step_ - 1) {
    next = full_;
    shift = o_.shift;
    if (probe_steps_ > 0 && !measured_valid_) choice_ = "joint";  // the probe was the stage
  }
  if (next == current_) return std::nullopt;
  if (next == full_) shift = o_.shift;
  StageSwitch s = make_switch(next, shift, x.dim(0));
  current_ = next;
  stages_.push_back({step + 1, next});
  return s;
}

double Dvg::call_work(const LatentGrid& grid) const {
  const int64_t full_tokens = tokens_of(run_.dit, full_);
  return wan::WanDit::forward_flops(run_.dit, tokens_of(run_.dit, grid)) /
         wan::WanDit::forward_flops(run_.dit, full_tokens);
}

void Dvg::observe(int step, int branch, const Tensor& x, const Tensor&) {
  const LatentGrid g = grid_of(x);
  if (g == full_)
    record(step, branch, CallKind::kFull);
  else
    record(step, branch, CallKind::kReduced, call_work(g));
}

std::optional<StepReport> Dvg::planned_report() const {
  if (o_.mode == "auto" && switch_step_ > 0) return std::nullopt;  // chosen after the probe
  const LatentGrid full = run_.latent;
  if (full[0] <= 0) return std::nullopt;
  Dvg copy(run_, o_);
  copy.plan_stages(full);
  const LatentGrid start = copy.current_;
  StepReport r;
  r.spec = name();
  double work = 0;
  for (int s = 0; s < run_.steps; ++s) {
    const bool low = s < switch_step_ && start != full;
    for (int b = 0; b < run_.branches; ++b)
      (b == 0 ? r.schedule_cond : r.schedule_uncond)
          .push_back(static_cast<char>(low ? CallKind::kReduced : CallKind::kFull));
    work += run_.branches * (low ? copy.call_work(start) : 1.0);
  }
  r.dense_calls = static_cast<int64_t>(run_.steps) * run_.branches;
  r.model_calls = r.dense_calls;
  r.block_stack_runs = r.dense_calls;
  r.work_fraction = work / static_cast<double>(r.dense_calls);
  if (start != full) copy.stages_.push_back({switch_step_, full});
  r.details = copy.details();
  return r;
}

nlohmann::json Dvg::details() const {
  nlohmann::json stages = nlohmann::json::array();
  for (const Stage& s : stages_)
    stages.push_back({{"first_step", s.first_step},
                      {"grid", {s.grid[0], s.grid[1], s.grid[2]}},
                      {"tokens", tokens_of(run_.dit, s.grid)}});
  nlohmann::json j = {{"mode", o_.mode}, {"stages", stages}};
  if (!choice_.empty()) j["choice"] = choice_;
  if (measured_valid_) {
    j["motion"] = std::isfinite(measured_.motion) ? nlohmann::json(measured_.motion) : nullptr;
    j["detail"] = measured_.detail;
  }
  return j;
}

std::unique_ptr<StepMethod> make_dvg(const std::string& options, const RunInfo& run) {
  sparse::PolicyOptions o("dvg", options, "--accel");
  DvgOptions d;
  d.mode = o.text("mode", d.mode);
  if (d.mode != "auto" && d.mode != "space" && d.mode != "time" && d.mode != "joint" &&
      d.mode != "full")
    throw_input_error("--accel dvg: mode='", d.mode, "' must be auto, space, time, joint or full");
  d.switch_at = o.number("switch", d.switch_at, 0.0, 0.99);
  d.scale = o.number("scale", d.scale, 0.1, 1.0);
  d.time = o.number("time", d.time, 0.1, 1.0);
  d.probe = o.number("probe", d.probe, 0.0, 0.99);
  d.motion = o.number("motion", d.motion, 0.0, 1e9);
  d.detail = o.number("detail", d.detail, 0.0, 1e9);
  d.shift = o.number("shift", d.shift, 0.0, 1e6);
  if (o.has("shift") && !(d.shift > 0))
    throw_input_error("--accel dvg: shift must be > 0 (the shift after the final switch)");
  const std::string noise = o.text("noise", "keep");
  if (noise != "keep" && noise != "fresh")
    throw_input_error("--accel dvg: noise='", noise, "' must be keep or fresh");
  d.keep_noise = noise == "keep";
  o.finish();
  if (run.image_conditioned)
    throw_input_error(
        "--accel dvg: progressive resolution runs text-to-video only (the image "
        "conditioning is on the full grid)");
  return std::make_unique<Dvg>(run, d);
}

}  // namespace vidax::accel
