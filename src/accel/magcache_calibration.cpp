#include "accel/magcache_calibration.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/atomic_file.h"

namespace vidax::accel {
namespace {

class CalibrationHook : public wan::BlockStackHook {
 public:
  CalibrationHook(StepMethod* owner, std::shared_ptr<MagRatioAccumulator> acc)
      : owner_(owner), acc_(std::move(acc)) {}
  bool run_blocks(const wan::DitSample& s, std::span<const float>,
                  std::span<const float>) override {
    owner_->record(static_cast<int>(s.step), s.cfg_branch, CallKind::kFull);
    return true;
  }
  void after_blocks(const wan::DitSample& s, std::span<const float> residual, int64_t rows,
                    int64_t dim) override {
    const size_t b = static_cast<size_t>(s.cfg_branch == 1 ? 1 : 0);
    std::vector<float>& previous = previous_[b];
    if (previous.size() == residual.size())
      acc_->add(static_cast<int>(s.step), static_cast<int>(b),
                magnitude_ratio(residual, previous, rows, dim));
    previous.assign(residual.begin(), residual.end());
  }

 private:
  StepMethod* owner_;
  std::shared_ptr<MagRatioAccumulator> acc_;
  std::array<std::vector<float>, 2> previous_;
};

class MagCacheCalibration : public StepMethod {
 public:
  MagCacheCalibration(RunInfo run, std::shared_ptr<MagRatioAccumulator> acc)
      : StepMethod(std::move(run)), acc_(std::move(acc)) {
    hook_ = std::make_shared<CalibrationHook>(this, acc_);
  }
  ~MagCacheCalibration() override { acc_->end_run(); }
  std::string name() const override { return "magcache-calibration"; }
  std::shared_ptr<wan::BlockStackHook> block_hook() override { return hook_; }

 private:
  std::shared_ptr<MagRatioAccumulator> acc_;
  std::shared_ptr<wan::BlockStackHook> hook_;
};

}  // namespace

MagRatioAccumulator::MagRatioAccumulator(int steps)
    : steps_(steps),
      sum_(static_cast<size_t>(steps), {0.0, 0.0}),
      count_(static_cast<size_t>(steps), {0, 0}) {
  VIDAX_CHECK(steps >= 1, "magcache calibration: ", steps, " steps");
}

void MagRatioAccumulator::add(int step, int branch, double ratio) {
  VIDAX_CHECK(step >= 0 && step < steps_ && (branch == 0 || branch == 1),
              "magcache calibration: call of step ", step, " branch ", branch);
  sum_[static_cast<size_t>(step)][static_cast<size_t>(branch)] += ratio;
  count_[static_cast<size_t>(step)][static_cast<size_t>(branch)] += 1;
}

std::vector<double> MagRatioAccumulator::ratios() const {
  std::vector<double> out;
  for (int s = 0; s < steps_; ++s)
    for (size_t b = 0; b < 2; ++b) {
      const int64_t n = count_[static_cast<size_t>(s)][b];
      const double mean = n > 0 ? sum_[static_cast<size_t>(s)][b] / static_cast<double>(n) : 1.0;
      out.push_back(s == 0 ? 1.0 : std::round(mean * 1e5) / 1e5);  // the reference's round(., 5)
    }
  return out;
}

double magnitude_ratio(std::span<const float> residual, std::span<const float> previous,
                       int64_t rows, int64_t dim) {
  VIDAX_CHECK(
      residual.size() == previous.size() && static_cast<int64_t>(residual.size()) == rows * dim,
      "magnitude_ratio: sizes differ");
  double sum = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double a = 0, b = 0;
    for (int64_t c = 0; c < dim; ++c) {
      const double x = residual[static_cast<size_t>(r * dim + c)];
      const double y = previous[static_cast<size_t>(r * dim + c)];
      a += x * x;
      b += y * y;
    }
    sum += std::sqrt(a) / std::sqrt(b);
  }
  return sum / static_cast<double>(rows);
}

std::unique_ptr<StepMethod> make_magcache_calibration(const RunInfo& run,
                                                      std::shared_ptr<MagRatioAccumulator> acc) {
  VIDAX_CHECK(acc && acc->steps() == run.steps, "magcache calibration: accumulator for ",
              acc ? acc->steps() : 0, " steps, run of ", run.steps);
  return std::make_unique<MagCacheCalibration>(run, std::move(acc));
}

void write_magcache_ratios(const std::string& path, const std::vector<double>& ratios, int steps,
                           const std::string& provenance_json) {
  const nlohmann::json j = {{"method", "magcache"},
                            {"steps", steps},
                            {"ratios", ratios},
                            {"provenance", nlohmann::json::parse(provenance_json)}};
  const std::string text = j.dump(1) + "\n";
  AtomicFile file(path);
  file.write_all(text.data(), text.size());
  file.commit();
}

std::vector<double> read_magcache_ratios(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw_input_error("--accel magcache: ratios=", path, ": cannot read the file");
  std::stringstream ss;
  ss << in.rdbuf();
  const auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (!j.is_object() || j.value("method", "") != "magcache" || !j.contains("ratios") ||
      !j["ratios"].is_array())
    throw_input_error("--accel magcache: ratios=", path,
                      ": not a MagCache table (vidax calibrate --method magcache writes one)");
  std::vector<double> ratios;
  for (const auto& v : j["ratios"]) {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0)
      throw_input_error("--accel magcache: ratios=", path, ": ratio ", ratios.size(),
                        " is not a positive number");
    ratios.push_back(v.get<double>());
  }
  if (ratios.size() < 2 || ratios.size() % 2 != 0 || ratios.size() > 20000)
    throw_input_error("--accel magcache: ratios=", path, ": ", ratios.size(),
                      " ratios; expected [cond, uncond] pairs, one per step");
  return ratios;
}

}  // namespace vidax::accel
