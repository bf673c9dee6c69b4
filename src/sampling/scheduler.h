// Flow-matching samplers for Wan: given the model's flow (velocity) prediction at the current
// sample, produce the next sample. Three are provided:
//   "unipc"  FlowUniPCMultistepScheduler of the official Wan code (the default there): UniPC
//            predictor of order 2 (bh2, data prediction) plus the UniC corrector from the 2nd step
//            on, first order at the first and last step.
//   "dpm++"  FlowDPMSolverMultistepScheduler: DPM-Solver++ 2M (midpoint), first order at the
//            first and last step.
//   "euler"  plain flow Euler, x_{i+1} = x_i + (sigma_{i+1} - sigma_i) * v.
// UniPC and DPM++ reproduce the float32 arithmetic of the reference (torch 0-dim float32 scalar
// coefficients, one rounding per tensor op, IEEE infinities at sigma = 1 and sigma = 0), so they
// agree with it to a few float32 ulps; see docs/sampling.md.
//
// Usage:
//   auto sched = make_scheduler("unipc", 50, 5.0);
//   for (int i = 0; i < sched->steps(); ++i)
//     x = sched->step(model(x, sched->timesteps()[i]), x);
//
// A Scheduler is stateful (multistep history) and not thread-safe; use one per trajectory.
// step() itself parallelises its element loops with OpenMP.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "sampling/flow_schedule.h"

namespace vidax {

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  virtual std::string_view name() const = 0;

  const std::vector<int64_t>& timesteps() const { return schedule_.timesteps; }  // model input
  const std::vector<float>& sigmas() const { return schedule_.sigmas; }  // steps + 1, last 0
  int steps() const { return static_cast<int>(schedule_.timesteps.size()); }
  int step_index() const { return step_index_; }  // index of the next step() call
  bool done() const { return step_index_ >= steps(); }

  // One step: `model_out` is the flow prediction v(sample, timesteps()[step_index()]); returns
  // the next sample (a new contiguous F32 tensor). Both inputs F32 of the same shape (any
  // rank). Steps run in order 0..steps()-1; calling past the end is a bug (CHECK).
  virtual Tensor step(const Tensor& model_out, const Tensor& sample) = 0;

  // Starts the sampler afresh at step k (0 <= k < steps()): its multistep history is dropped,
  // so the next step() is at index k and runs as a first step does (first order, no UniC
  // corrector). For a sample that did not come from this sampler's previous step, e.g. a
  // latent re-noised on another grid (progressive resolution, accel/dvg.h).
  void restart_at(int k);

  // Debug intermediates of the last step() call, for tests and tracing:
  // the data prediction x0 = sample - sigma * v (computed from the sample as passed in) ...
  const Tensor& last_x0_pred() const { return last_x0_pred_; }
  // ... and UniPC's UniC-corrected version of the incoming sample, which replaced it as that
  // step's starting point (undefined for other samplers and for UniPC's first step).
  const Tensor& last_corrected_sample() const { return last_corrected_sample_; }

 protected:
  explicit Scheduler(FlowSchedule schedule);
  // CHECKs dtype (F32), equal shapes and that a step is left.
  void check_step(const Tensor& model_out, const Tensor& sample) const;
  // Drops the multistep history (restart_at); single-step samplers keep none.
  virtual void clear_history() {}
  float sigma_at(int k) const { return schedule_.sigmas[static_cast<size_t>(k)]; }

  FlowSchedule schedule_;
  int step_index_ = 0;
  Tensor last_x0_pred_;
  Tensor last_corrected_sample_;
};

// name: "unipc" | "dpm++" (alias "dpmpp") | "euler". InputError (naming the value and what was
// expected) for an unknown name, steps < 1 or shift <= 0 / not finite.
std::unique_ptr<Scheduler> make_scheduler(const std::string& name, int steps, double shift);

// The concrete samplers (arguments already validated by make_scheduler; CHECKed here).
std::unique_ptr<Scheduler> make_unipc_scheduler(int steps, double shift);
std::unique_ptr<Scheduler> make_dpmpp_scheduler(int steps, double shift);
std::unique_ptr<Scheduler> make_euler_scheduler(int steps, double shift);

}  // namespace vidax
