#include "accel/easycache.h"

#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "sparse/policy_options.h"

namespace vidax::accel {
namespace {

// torch's float32 mean of |a - b| (b null: of |a|), accumulated in double here.
float mean_abs(const Tensor& a_in, const Tensor* b_in = nullptr) {
  const Tensor a = a_in.contiguous();
  const Tensor b = b_in != nullptr ? b_in->contiguous() : Tensor();
  VIDAX_CHECK(b_in == nullptr || a.numel() == b.numel(), "easycache: shapes differ");
  const float* pa = a.data<float>();
  const float* pb = b_in != nullptr ? b.data<float>() : nullptr;
  const int64_t n = a.numel();
  double sum = 0;  // serial: the same sum on every rank and for every thread count
  for (int64_t i = 0; i < n; ++i)
    sum += std::fabs(static_cast<double>(pa[i]) - (pb != nullptr ? static_cast<double>(pb[i]) : 0));
  return static_cast<float>(sum / static_cast<double>(n));
}

Tensor difference(const Tensor& a_in, const Tensor& b_in) {  // a - b, f32
  const Tensor a = a_in.contiguous(), b = b_in.contiguous();
  Tensor out = Tensor::zeros(a.shape());
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* po = out.mutable_data<float>();
  for (int64_t i = 0; i < a.numel(); ++i) po[i] = pa[i] - pb[i];
  return out;
}

}  // namespace

EasyCache::EasyCache(RunInfo run, double thresh, int ret)
    : StepMethod(std::move(run)), thresh_(thresh), ret_(ret) {}

std::string EasyCache::name() const {
  return "easycache:thresh=" + spec_number(thresh_) + ",ret=" + std::to_string(ret_);
}

bool EasyCache::skip_step(int step, const Tensor& x_in) {
  const Tensor x = x_in.dtype() == DType::kF32 ? x_in.contiguous() : x_in.to(DType::kF32);
  EasyCacheDecision d;
  d.step = step;
  if (step < ret_ || step >= run_.steps - 1) {
    d.run = true;
    acc_ = 0;
  } else if (previous_input_.defined() && computed_output_.defined()) {
    const float input_change = mean_abs(x, &previous_input_);
    if (k_) {
      const float output_norm = mean_abs(computed_output_);
      const float pred = *k_ * (input_change / output_norm);
      acc_ += pred;
      d.pred_change = pred;
      d.k = *k_;
      d.run = !(acc_ < static_cast<float>(thresh_));
      if (d.run) acc_ = 0;
    } else {
      d.run = true;  // no rate yet: the first call after the window computes
    }
  } else {
    d.run = true;
  }
  d.acc = acc_;
  previous_input_ = x.clone();
  // A skipped step reuses both branches' transformations; each must exist.
  if (!d.run && (!delta_[0].defined() || (run_.branches == 2 && !delta_[1].defined())))
    d.run = true;
  decisions_.push_back(d);
  if (!d.run)
    for (int b = 0; b < run_.branches; ++b) record(step, b, CallKind::kSkipped);
  return !d.run;
}

Tensor EasyCache::output(int, int branch, const Tensor& x_in) {
  VIDAX_CHECK(branch == 0 || branch == 1, "easycache: branch ", branch);
  const Tensor x = x_in.dtype() == DType::kF32 ? x_in.contiguous() : x_in.to(DType::kF32);
  const Tensor& delta = delta_[static_cast<size_t>(branch)];
  Tensor out = Tensor::zeros(x.shape());
  const float* px = x.data<float>();
  const float* pd = delta.data<float>();
  float* po = out.mutable_data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) po[i] = px[i] + pd[i];
  return out;
}

void EasyCache::observe(int step, int branch, const Tensor& x_in, const Tensor& out_in) {
  const Tensor x = x_in.dtype() == DType::kF32 ? x_in.contiguous() : x_in.to(DType::kF32);
  const Tensor out = out_in.dtype() == DType::kF32 ? out_in.contiguous() : out_in.to(DType::kF32);
  record(step, branch, CallKind::kFull);
  if (branch == 0) {
    // The rate between the last two computed conditional calls: |dv| / |dx|.
    if (computed_output_.defined() && computed_input_.defined()) {
      const float output_change = mean_abs(out, &computed_output_);
      const float input_change = mean_abs(x, &computed_input_);
      k_ = output_change / input_change;
    }
    computed_input_ = x.clone();
    computed_output_ = out.clone();
  }
  delta_[static_cast<size_t>(branch)] = difference(out, x);
}

std::unique_ptr<StepMethod> make_easycache(const std::string& options, const RunInfo& run) {
  sparse::PolicyOptions o("easycache", options, "--accel");
  const double thresh = o.number("thresh", 0.05, 0.0, 1e9);
  const int ret = static_cast<int>(o.integer("ret", 10, 1, 100000));
  o.finish();
  return std::make_unique<EasyCache>(run, thresh, ret);
}

}  // namespace vidax::accel
