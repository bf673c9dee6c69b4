#include "accel/magcache.h"

#include <cfenv>
#include <cmath>
#include <cstdio>

#include "accel/magcache_calibration.h"
#include "core/error.h"
#include "sparse/policy_options.h"

namespace vidax::accel {
std::vector<double> nearest_interp(const std::vector<double>& src, int n) {
  VIDAX_CHECK(!src.empty() && n >= 1, "nearest_interp: empty input or n = ", n);
  if (n == 1) return {src.back()};
  const double scale = static_cast<double>(src.size() - 1) / static_cast<double>(n - 1);
  std::vector<double> out(static_cast<size_t>(n));
  const int mode = std::fegetround();
  std::fesetround(FE_TONEAREST);  // numpy.round: half to even
  for (int i = 0; i < n; ++i) {
    const auto idx = static_cast<size_t>(std::nearbyint(static_cast<double>(i) * scale));
    out[static_cast<size_t>(i)] = src[std::min(idx, src.size() - 1)];
  }
  std::fesetround(mode);
  return out;
}

std::vector<std::array<bool, 2>> magcache_schedule(const std::vector<double>& ratios, int steps,
                                                   int branches, double thresh, int k,
                                                   double retention) {
  VIDAX_CHECK(ratios.size() >= 2 && ratios.size() % 2 == 0 && steps >= 1,
              "magcache: ratios must be interleaved [cond, uncond] pairs");
  // Per branch, interpolated to the step count when the table has another length.
  std::array<std::vector<double>, 2> per_branch;
  for (size_t b = 0; b < 2; ++b) {
    std::vector<double> one;
    for (size_t i = b; i < ratios.size(); i += 2) one.push_back(ratios[i]);
    per_branch[b] = static_cast<int>(one.size()) == steps ? one : nearest_interp(one, steps);
  }
  // The reference counts calls (cond and uncond interleaved): N = branches x steps.
  const int64_t calls = static_cast<int64_t>(steps) * branches;
  const auto first_cached = static_cast<int64_t>(static_cast<double>(calls) * retention);
  std::array<double, 2> ratio{1.0, 1.0}, err{0.0, 0.0};
  std::array<int, 2> skipped{0, 0};
  std::vector<std::array<bool, 2>> run(static_cast<size_t>(steps), {true, true});
  for (int s = 0; s < steps; ++s) {
    for (int b = 0; b < branches; ++b) {
      const int64_t cnt = static_cast<int64_t>(s) * branches + b;
      if (cnt < first_cached) continue;
      const size_t i = static_cast<size_t>(b);
      ratio[i] *= per_branch[i][static_cast<size_t>(s)];
      skipped[i] += 1;
      err[i] += std::fabs(1.0 - ratio[i]);
      if (err[i] < thresh && skipped[i] <= k) {
        run[static_cast<size_t>(s)][i] = false;
      } else {
        ratio[i] = 1.0;
        skipped[i] = 0;
        err[i] = 0.0;
      }
    }
  }
  return run;
}

MagCache::MagCache(RunInfo run, const std::vector<double>& ratios, double thresh, int k,
                   double retention, std::string family, std::string ratios_file)
    : StepMethod(std::move(run)),
      thresh_(thresh),
      k_(k),
      retention_(retention),
      family_(std::move(family)),
      ratios_file_(std::move(ratios_file)),
      hook_(recording_block_hook(
          this, [this](int step, int branch, std::span<const float>, std::span<const float>) {
            return decide(step, branch);
          })) {
  schedule_ = magcache_schedule(ratios, run_.steps, run_.branches, thresh_, k_, retention_);
}

std::string MagCache::name() const {
  return "magcache:thresh=" + spec_number(thresh_) + ",k=" + std::to_string(k_) +
         ",retention=" + spec_number(retention_) +
         (ratios_file_.empty() ? ",model=" + family_ : ",ratios=" + ratios_file_);
}

bool MagCache::decide(int step, int branch) {
  VIDAX_CHECK(step >= 0 && step < run_.steps && (branch == 0 || branch == 1),
              "magcache: call of step ", step, " branch ", branch, " outside the run");
  const size_t b = static_cast<size_t>(branch);
  // After a model change (the other expert) the kept residual is gone: run once.
  const bool run = schedule_[static_cast<size_t>(step)][b] || must_run_[b];
  if (run) must_run_[b] = false;
  return run;
}

std::unique_ptr<StepMethod> make_magcache(const std::string& options, const RunInfo& run) {
  sparse::PolicyOptions o("magcache", options, "--accel");
  const double thresh = o.number("thresh", 0.12, 0.0, 1e9);
  const int k = static_cast<int>(o.integer("k", 2, 1, 1000));
  const double retention = o.number("retention", 0.2, 0.0, 1.0);
  if (o.has("ratios")) {  // a calibrated table (vidax calibrate --method magcache)
    if (o.has("model")) throw_input_error("--accel magcache: give model= or ratios=, not both");
    const std::string path = o.text("ratios", "");
    o.finish();
    return std::make_unique<MagCache>(run, read_magcache_ratios(path), thresh, k, retention, "",
                                      path);
  }
  const std::string requested = o.text("model", "auto");
  o.finish();
  const std::string family = published_family(requested, run);
  const auto ratios = family.empty() ? std::nullopt : magcache_published_ratios(family);
  if (!ratios)
    throw_input_error("--accel magcache: no published magnitude ratios for ",
                      requested == "auto" ? "this model (" + run.dit.kind_name() + ", dim " +
                                                std::to_string(run.dit.dim) + ")"
                                          : "model=" + requested,
                      "; give model=t2v-1.3b|t2v-14b|i2v-480p|i2v-720p");
  return std::make_unique<MagCache>(run, *ratios, thresh, k, retention, family);
}

}  // namespace vidax::accel
