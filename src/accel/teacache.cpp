#include "accel/teacache.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "accel/teacache_calibration.h"
#include "core/error.h"
#include "sparse/policy_options.h"

namespace vidax::accel {
namespace {

// Published TeaCache4Wan2.1 polynomials (ali-vilab/TeaCache @ 7c10efc, teacache_generate.py),
// highest power first. Data, not code.
struct Coefficients {
  const char* family;
  std::array<double, 5> e, e0;
};
constexpr Coefficients kPublished[] = {
    {"t2v-1.3b",
     {2.39676752e+03, -1.31110545e+03, 2.01331979e+02, -8.29855975e+00, 1.37887774e-01},
     {-5.21862437e+04, 9.23041404e+03, -5.28275948e+02, 1.36987616e+01, -4.99875664e-02}},
    {"t2v-14b",
     {-5784.54975374, 5449.50911966, -1811.16591783, 256.27178429, -13.02252404},
     {-3.03318725e+05, 4.90537029e+04, -2.65530556e+03, 5.87365115e+01, -3.15583525e-01}},
    {"i2v-480p",
     {-3.02331670e+02, 2.23948934e+02, -5.25463970e+01, 5.87348440e+00, -2.01973289e-01},
     {2.57151496e+05, -3.54229917e+04, 1.40286849e+03, -1.35890334e+01, 1.32517977e-01}},
    {"i2v-720p",
     {-114.36346466, 65.26524496, -18.82220707, 4.91518089, -0.23412683},
     {8.10705460e+03, 2.13393892e+03, -3.72934672e+02, 1.66203073e+01, -4.17769401e-02}},
};

// mean|a| as torch computes a float32 mean (the reference calls .mean() on f32 tensors).
float mean_abs(std::span<const float> a) {
  double sum = 0;
  for (float v : a) sum += std::fabs(static_cast<double>(v));
  return static_cast<float>(sum / static_cast<double>(a.size()));
}

float mean_abs_diff(std::span<const float> a, std::span<const float> b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i)
    sum += std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
  return static_cast<float>(sum / static_cast<double>(a.size()));
}

}  // namespace

std::optional<std::array<double, 5>> teacache_coefficients(const std::string& family, bool e0) {
  for (const auto& c : kPublished)
    if (family == c.family) return e0 ? c.e0 : c.e;
  return std::nullopt;
}

TeaCache::TeaCache(RunInfo run, double thresh, bool e0, std::array<double, 5> coefficients,
                   std::string family)
    : StepMethod(std::move(run)),
      thresh_(thresh),
      e0_(e0),
      coefficients_(coefficients),
      family_(std::move(family)),
      hook_(recording_block_hook(
          this, [this](int step, int branch, std::span<const float> e, std::span<const float> e0) {
            return decide(step, branch, e, e0);
          })) {}

std::string TeaCache::name() const {
  std::string s = "teacache:thresh=" + spec_number(thresh_) + ",mode=" + (e0_ ? "e0" : "e");
  if (!family_.empty()) return s + ",model=" + family_;
  s += ",coeffs=";
  for (size_t i = 0; i < coefficients_.size(); ++i) {
    if (i > 0) s += '/';
    s += spec_number(coefficients_[i]);
  }
  return s;
}

void TeaCache::on_model_change() { must_run_ = {true, true}; }

bool TeaCache::decide(int step, int branch, std::span<const float> e, std::span<const float> e0) {
  VIDAX_CHECK(branch == 0 || branch == 1, "teacache: branch ", branch);
  const size_t b = static_cast<size_t>(branch);
  const std::span<const float> m = e0_ ? e0 : e;
  // Always-run windows, in steps: the reference's ret_steps (2 calls, or 10 with use_ret_steps)
  // and cutoff_steps (2 steps - 2 calls, or all of them).
  const int ret = e0_ ? 5 : 1;
  const int cutoff = e0_ ? run_.steps : run_.steps - 1;
  TeaCacheDecision d;
  d.step = step;
  d.branch = branch;
  if (step < ret || step >= cutoff || must_run_[b] || previous_[b].size() != m.size()) {
    d.run = true;
    acc_[b] = 0;
  } else {
    // rel_l1 as the reference: two float32 means, their float32 ratio, then float64.
    const float num = mean_abs_diff(m, previous_[b]), den = mean_abs(previous_[b]);
    d.rel_l1 = static_cast<double>(num / den);
    double y = 0;  // numpy.poly1d: Horner in float64
    for (double c : coefficients_) y = y * d.rel_l1 + c;
    d.rescaled = y;
    acc_[b] += y;
    d.run = !(acc_[b] < thresh_);
    if (d.run) acc_[b] = 0;
  }
  d.acc = acc_[b];
  previous_[b].assign(m.begin(), m.end());
  if (d.run) must_run_[b] = false;
  decisions_.push_back(d);
  return d.run;
}

std::unique_ptr<StepMethod> make_teacache(const std::string& options, const RunInfo& run) {
  sparse::PolicyOptions o("teacache", options, "--accel");
  const double thresh = o.number("thresh", 0.2, 0.0, 1e9);
  const std::string mode = o.text("mode", "e");
  if (mode != "e" && mode != "e0")
    throw_input_error("--accel teacache: mode=", mode,
                      " (expected e, the time embedding, or e0, its projection: the reference's "
                      "use_ret_steps)");
  const bool e0 = mode == "e0";
  std::array<double, 5> coefficients{};
  std::string family;
  if (o.has("table")) {  // a fit from vidax calibrate --method teacache
    if (o.has("model") || o.has("coeffs"))
      throw_input_error("--accel teacache: give one of model=, coeffs= and table=");
    const std::string path = o.text("table", "");
    const auto [fitted, fitted_e0] = read_teacache_table(path);
    if (fitted_e0 != e0)
      throw_input_error("--accel teacache: table=", path,
                        " was fitted for mode=", fitted_e0 ? "e0" : "e",
                        ", the run uses mode=", e0 ? "e0" : "e");
    coefficients = fitted;
  } else if (o.has("coeffs")) {
    if (o.has("model")) throw_input_error("--accel teacache: give model= or coeffs=, not both");
    const std::string text = o.text("coeffs", "");
    std::stringstream in(text);
    std::string item;
    size_t n = 0;
    while (std::getline(in, item, '/')) {
      char* end = nullptr;
      const double v = std::strtod(item.c_str(), &end);
      if (item.empty() || end != item.c_str() + item.size() || !std::isfinite(v) || n == 5)
        throw_input_error("--accel teacache: coeffs='", text,
                          "' must be five numbers c0/c1/c2/c3/c4 (highest power first)");
      coefficients[n++] = v;
    }
    if (n != 5)
      throw_input_error("--accel teacache: coeffs='", text,
                        "' must be five numbers c0/c1/c2/c3/c4 (highest power first)");
  } else {
    const std::string requested = o.text("model", "auto");
    family = published_family(requested, run);
    const auto published = family.empty() ? std::nullopt : teacache_coefficients(family, e0);
    if (!published)
      throw_input_error("--accel teacache: no published coefficients for ",
                        requested == "auto" ? "this model (" + run.dit.kind_name() + ", dim " +
                                                  std::to_string(run.dit.dim) + ")"
                                            : "model=" + requested,
                        "; give model=t2v-1.3b|t2v-14b|i2v-480p|i2v-720p or coeffs=c0/c1/c2/c3/c4");
    coefficients = *published;
  }
  o.finish();
  return std::make_unique<TeaCache>(run, thresh, e0, coefficients, family);
}

}  // namespace vidax::accel
