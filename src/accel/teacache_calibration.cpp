#include "accel/teacache_calibration.h"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/atomic_file.h"

namespace vidax::accel {
namespace {

// mean|a - b| / mean|b| in double.
double rel_l1(std::span<const float> a, std::span<const float> b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    den += std::fabs(static_cast<double>(b[i]));
  }
  return den > 0 ? num / den : 0.0;
}

// A dense run: the hook keeps each call's modulated input, observe() pairs it with the output.
class TeaCacheCalibration : public StepMethod {
 public:
  TeaCacheCalibration(RunInfo run, bool e0, std::shared_ptr<TeaCachePairs> pairs)
      : StepMethod(std::move(run)), e0_(e0), pairs_(std::move(pairs)) {
    hook_ = recording_block_hook(
        this, [this](int, int branch, std::span<const float> e, std::span<const float> e0) {
          const std::span<const float> m = e0_ ? e0 : e;
          input_[static_cast<size_t>(branch == 1 ? 1 : 0)].assign(m.begin(), m.end());
          return true;
        });
  }
  std::string name() const override { return "teacache-calibration"; }
  std::shared_ptr<wan::BlockStackHook> block_hook() override { return hook_; }
  void observe(int, int branch, const Tensor&, const Tensor& out_in) override {
    const size_t b = static_cast<size_t>(branch);
    const Tensor out = out_in.contiguous();
    const std::span<const float> o(out.data<float>(), static_cast<size_t>(out.numel()));
    if (!previous_out_[b].empty() && previous_in_[b].size() == input_[b].size()) {
      pairs_->x.push_back(rel_l1(input_[b], previous_in_[b]));
      pairs_->y.push_back(rel_l1(o, previous_out_[b]));
    }
    previous_in_[b] = input_[b];
    previous_out_[b].assign(o.begin(), o.end());
  }

 private:
  bool e0_;
  std::shared_ptr<TeaCachePairs> pairs_;
  std::shared_ptr<wan::BlockStackHook> hook_;
  std::array<std::vector<float>, 2> input_, previous_in_, previous_out_;
};

}  // namespace

std::array<double, 5> polyfit4(const std::vector<double>& x, const std::vector<double>& y) {
  VIDAX_CHECK(x.size() == y.size(), "polyfit4: ", x.size(), " x and ", y.size(), " y");
  if (std::set<double>(x.begin(), x.end()).size() < 5)
    throw_input_error("teacache calibration: ", x.size(),
                      " points with fewer than 5 distinct input changes; calibrate on more "
                      "steps or prompts");
  // Normal equations on x scaled to [-1, 1] (conditioning), solved by Gaussian elimination with
  // partial pivoting in long double, then mapped back to powers of x.
  double lo = x[0], hi = x[0];
  for (double v : x) lo = std::min(lo, v), hi = std::max(hi, v);
  const long double mid = (static_cast<long double>(lo) + hi) / 2,
                    half = std::max<long double>((static_cast<long double>(hi) - lo) / 2, 1e-300L);
  long double a[5][6] = {};
  for (size_t i = 0; i < x.size(); ++i) {
    const long double t = (x[i] - mid) / half;
    long double p[5] = {1, t, t * t, t * t * t, t * t * t * t};
    for (int r = 0; r < 5; ++r) {
      for (int c = 0; c < 5; ++c) a[r][c] += p[r] * p[c];
      a[r][5] += p[r] * y[i];
    }
  }
  for (int col = 0; col < 5; ++col) {
    int pivot = col;
    for (int r = col + 1; r < 5; ++r)
      if (std::fabs(a[r][col]) > std::fabs(a[pivot][col])) pivot = r;
    for (int c = 0; c < 6; ++c) std::swap(a[col][c], a[pivot][c]);
    VIDAX_CHECK(a[col][col] != 0, "polyfit4: singular system");
    for (int r = 0; r < 5; ++r) {
      if (r == col) continue;
      const long double f = a[r][col] / a[col][col];
      for (int c = col; c < 6; ++c) a[r][c] -= f * a[col][c];
    }
  }
  long double q[5];  // coefficients of t^0..t^4
  for (int r = 0; r < 5; ++r) q[r] = a[r][5] / a[r][r];
  // sum q_k ((x - mid) / half)^k -> powers of x (binomial expansion).
  long double px[5] = {};
  for (int k = 0; k < 5; ++k) {
    const long double scale = q[k] / std::pow(half, static_cast<long double>(k));
    for (int j = 0; j <= k; ++j) {
      long double binom = 1;
      for (int m = 0; m < j; ++m) binom = binom * (k - m) / (m + 1);
      px[j] += scale * binom * std::pow(-mid, static_cast<long double>(k - j));
    }
  }
  return {static_cast<double>(px[4]), static_cast<double>(px[3]), static_cast<double>(px[2]),
          static_cast<double>(px[1]), static_cast<double>(px[0])};
}

std::unique_ptr<StepMethod> make_teacache_calibration(const RunInfo& run, bool e0,
                                                      std::shared_ptr<TeaCachePairs> pairs) {
  return std::make_unique<TeaCacheCalibration>(run, e0, std::move(pairs));
}

void write_teacache_table(const std::string& path, const std::array<double, 5>& coefficients,
                          bool e0, size_t points, const std::string& provenance_json) {
  const nlohmann::json j = {{"method", "teacache"},
                            {"mode", e0 ? "e0" : "e"},
                            {"coefficients", coefficients},
                            {"points", points},
                            {"provenance", nlohmann::json::parse(provenance_json)}};
  const std::string text = j.dump(1) + "\n";
  AtomicFile file(path);
  file.write_all(text.data(), text.size());
  file.commit();
}

std::pair<std::array<double, 5>, bool> read_teacache_table(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw_input_error("--accel teacache: table=", path, ": cannot read the file");
  std::stringstream ss;
  ss << in.rdbuf();
  const auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (!j.is_object() || j.value("method", "") != "teacache" || !j.contains("coefficients") ||
      !j["coefficients"].is_array() || j["coefficients"].size() != 5 ||
      (j.value("mode", "") != "e" && j.value("mode", "") != "e0"))
    throw_input_error("--accel teacache: table=", path,
                      ": not a TeaCache table (vidax calibrate --method teacache writes one)");
  std::array<double, 5> c{};
  for (size_t i = 0; i < 5; ++i) {
    if (!j["coefficients"][i].is_number() || !std::isfinite(j["coefficients"][i].get<double>()))
      throw_input_error("--accel teacache: table=", path, ": coefficient ", i,
                        " is not a finite number");
    c[i] = j["coefficients"][i].get<double>();
  }
  return {c, j["mode"] == "e0"};
}

}  // namespace vidax::accel
