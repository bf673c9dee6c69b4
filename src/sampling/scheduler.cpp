#include "sampling/scheduler.h"

#include <cmath>
#include <utility>

#include "core/error.h"

namespace vidax {

Scheduler::Scheduler(FlowSchedule schedule) : schedule_(std::move(schedule)) {
  VIDAX_CHECK(
      !schedule_.timesteps.empty() && schedule_.sigmas.size() == schedule_.timesteps.size() + 1,
      "malformed schedule");
}

void Scheduler::check_step(const Tensor& model_out, const Tensor& sample) const {
  VIDAX_CHECK(step_index_ < steps(), name(), ": step ", step_index_,
              " called but the schedule has ", steps(), " steps");
  VIDAX_CHECK(model_out.defined() && sample.defined(), name(), ": undefined tensor");
  VIDAX_CHECK(model_out.dtype() == DType::kF32 && sample.dtype() == DType::kF32, name(),
              ": model_out and sample must be F32, got ", model_out.describe(), " and ",
              sample.describe());
  VIDAX_CHECK(model_out.shape() == sample.shape(), name(), ": model_out ", model_out.shape().str(),
              " vs sample ", sample.shape().str());
}

void Scheduler::restart_at(int k) {
  VIDAX_CHECK(k >= 0 && k < steps(), name(), ": restart at step ", k, " of ", steps());
  clear_history();
  step_index_ = k;
  last_x0_pred_ = Tensor();
  last_corrected_sample_ = Tensor();
}

std::unique_ptr<Scheduler> make_scheduler(const std::string& name, int steps, double shift) {
  if (steps < 1) throw_input_error("sampling steps must be >= 1, got ", steps);
  if (!(shift > 0) || !std::isfinite(shift)) {
    throw_input_error("sample shift must be a finite number > 0, got ", shift);
  }
  if (name == "unipc") return make_unipc_scheduler(steps, shift);
  if (name == "dpm++" || name == "dpmpp") return make_dpmpp_scheduler(steps, shift);
  if (name == "euler") return make_euler_scheduler(steps, shift);
  throw_input_error("sampler '", name, "' is not known (expected unipc, dpm++ or euler)");
}

}  // namespace vidax
