#include "accel/hsa.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>

#include "core/error.h"
#include "sparse/policy_options.h"

namespace vidax::accel {
Hsa::Hsa(RunInfo run, double budget, int warmup, std::vector<double> sync, double gamma)
    : StepMethod(std::move(run)),
      budget_(budget),
      warmup_(warmup),
      sync_(std::move(sync)),
      gamma_(gamma) {
  for (double f : sync_)
    sync_steps_.push_back(static_cast<int>(std::lround(f * static_cast<double>(run_.steps))));
}

std::string Hsa::name() const {
  std::string s =
      "hsa:budget=" + spec_number(budget_) + ",warmup=" + std::to_string(warmup_) + ",sync=";
  for (size_t i = 0; i < sync_.size(); ++i) {
    if (i > 0) s += '/';
    s += spec_number(sync_[i]);
  }
  if (sync_.empty()) s += "none";
  return s + ",gamma=" + spec_number(gamma_);
}

bool Hsa::dense_step(int step) const {
  return budget_ >= 1.0 || step < warmup_ || step >= run_.steps - 1 ||
         std::find(sync_steps_.begin(), sync_steps_.end(), step) != sync_steps_.end();
}

const std::vector<int64_t>* Hsa::active_tokens(int step) {
  current_step_ = step;
  // Scores need two evaluations of every token; a new model (the other expert) has no store.
  const bool scored = !evaluations_.empty() && std::all_of(evaluations_.begin(), evaluations_.end(),
                                                           [](int e) { return e >= 2; });
  current_dense_ = dense_step(step) || must_be_dense_ || !scored;
  active_.clear();
  if (current_dense_) return nullptr;
  const int64_t L = run_.tokens;
  std::vector<double> score(static_cast<size_t>(L));
  for (int64_t j = 0; j < L; ++j) {
    const float* a = v_last_.data() + j * row_width_;
    const float* b = v_prev_.data() + j * row_width_;
    double diff = 0, norm = 0;
    for (int64_t c = 0; c < row_width_; ++c) {
      diff += (static_cast<double>(a[c]) - b[c]) * (static_cast<double>(a[c]) - b[c]);
      norm += static_cast<double>(a[c]) * a[c];
    }
    const double rel = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
    score[static_cast<size_t>(j)] = rel * std::exp(gamma_ * idle_[static_cast<size_t>(j)]);
  }
  const auto n = static_cast<int64_t>(std::ceil(budget_ * static_cast<double>(L)));
  std::vector<int64_t> order(static_cast<size_t>(L));
  std::iota(order.begin(), order.end(), 0);
  // Highest scores first; ties by token index (deterministic on every rank).
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
    return score[static_cast<size_t>(x)] > score[static_cast<size_t>(y)];
  });
  active_.assign(order.begin(), order.begin() + std::max<int64_t>(1, std::min(n, L)));
  std::sort(active_.begin(), active_.end());
  return &active_;
}

void Hsa::complete_prediction(int step, Tensor& prediction_in) {
  VIDAX_CHECK(step == current_step_, "hsa: prediction of step ", step, " without its subset");
  const std::array<int64_t, 3> patch = run_.dit.patch;
  Tensor prediction = prediction_in.contiguous();
  if (prediction.raw_data() == prediction_in.raw_data()) prediction = prediction_in.clone();
  const int64_t C = prediction.dim(0), F = prediction.dim(1), H = prediction.dim(2),
                W = prediction.dim(3);
  const int64_t f2 = F / patch[0], h2 = H / patch[1], w2 = W / patch[2];
  const int64_t L = f2 * h2 * w2, width = C * patch[0] * patch[1] * patch[2];
  VIDAX_CHECK(L == run_.tokens, "hsa: ", L, " tokens, the run has ", run_.tokens);
  if (row_width_ == 0) {
    // Where each token's values sit in the [C, F, H, W] prediction (its patch, every channel).
    row_width_ = width;
    element_of_.resize(static_cast<size_t>(L * width));
    for (int64_t j = 0; j < L; ++j) {
      const int64_t tf = j / (h2 * w2), th = (j / w2) % h2, tw = j % w2;
      int64_t k = 0;
      for (int64_t c = 0; c < C; ++c)
        for (int64_t a = 0; a < patch[0]; ++a)
          for (int64_t b = 0; b < patch[1]; ++b)
            for (int64_t d = 0; d < patch[2]; ++d)
              element_of_[static_cast<size_t>(j * width + k++)] =
                  ((c * F + tf * patch[0] + a) * H + th * patch[1] + b) * W + tw * patch[2] + d;
    }
    v_last_.assign(static_cast<size_t>(L * width), 0.0f);
    v_prev_ = v_last_;
    evaluations_.assign(static_cast<size_t>(L), 0);
    idle_.assign(static_cast<size_t>(L), 0);
  }
  float* p = prediction.mutable_data<float>();
  auto evaluated = [&](int64_t j) {  // token j's velocity is fresh this step
    float* last = v_last_.data() + j * width;
    float* prev = v_prev_.data() + j * width;
    const int64_t* at = element_of_.data() + j * width;
    for (int64_t k = 0; k < width; ++k) {
      prev[k] = last[k];
      last[k] = p[at[k]];
    }
    evaluations_[static_cast<size_t>(j)] = std::min(2, evaluations_[static_cast<size_t>(j)] + 1);
    idle_[static_cast<size_t>(j)] = 0;
  };
  if (current_dense_) {
    for (int64_t j = 0; j < L; ++j) evaluated(j);
    must_be_dense_ = false;
    for (int b = 0; b < run_.branches; ++b) record(step, b, CallKind::kFull);
    return;  // the prediction is unchanged
  }
  // Inactive tokens take their cached velocity: with Euler, x_j += (s_next - s) v_j.
  size_t a = 0;
  for (int64_t j = 0; j < L; ++j) {
    if (a < active_.size() && active_[a] == j) {
      evaluated(j);
      ++a;
    } else {
      const float* last = v_last_.data() + j * width;
      const int64_t* at = element_of_.data() + j * width;
      for (int64_t k = 0; k < width; ++k) p[at[k]] = last[k];
      idle_[static_cast<size_t>(j)] += 1;
    }
  }
  prediction_in = prediction;
  const double work = wan::WanDit::subset_flops(run_.dit, L, static_cast<int64_t>(active_.size())) /
                      wan::WanDit::forward_flops(run_.dit, L);
  for (int b = 0; b < run_.branches; ++b) record(step, b, CallKind::kPartial, work);
}

std::unique_ptr<StepMethod> make_hsa(const std::string& options, const RunInfo& run) {
  sparse::PolicyOptions o("hsa", options, "--accel");
  const double budget = o.number("budget", 0.5, 1e-6, 1.0);
  const int warmup = static_cast<int>(o.integer("warmup", 5, 2, 100000));
  const double gamma = o.number("gamma", 0.1, 0.0, 100.0);
  std::vector<double> sync;
  {
    const std::string text = o.text("sync", "0.4/0.73");
    if (text != "none") {
      std::stringstream in(text);
      std::string item;
      while (std::getline(in, item, '/')) {
        char* end = nullptr;
        const double f = std::strtod(item.c_str(), &end);
        if (item.empty() || end != item.c_str() + item.size() || !(f > 0 && f < 1))
          throw_input_error("--accel hsa: sync='", text,
                            "' must be fractions of the run in (0, 1) separated by '/', or none");
        sync.push_back(f);
      }
    }
  }
  o.finish();
  if (run.sampler != "euler")
    throw_input_error(
        "--accel hsa: needs --sampler euler (an inactive token advances with its "
        "cached velocity, an Euler step; got ",
        run.sampler, ")");
  if (run.sequence_parallel > 1 || run.tensor_parallel > 1)
    throw_input_error(
        "--accel hsa: runs in one process or under --mesh cfg=2; token subsets are "
        "not split over ring, ulysses or tp ranks");
  return std::make_unique<Hsa>(run, budget, warmup, std::move(sync), gamma);
}

}  // namespace vidax::accel
