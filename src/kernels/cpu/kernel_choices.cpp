#include "kernels/cpu/kernel_choices.h"

#include <omp.h>

#include <optional>

#include "core/profile.h"

namespace vidax {
namespace {

std::optional<KernelChoices>& current() {
  static std::optional<KernelChoices> choices;
  return choices;
}

}  // namespace

KernelChoices kernel_choices() {
  return current() ? *current() : KernelChoices::from_environment();
}

void set_kernel_choices(const KernelChoices& choices) { current() = choices; }

void apply_exec_context(const ExecContext& ctx) {
  if (ctx.threads > 0) omp_set_num_threads(ctx.threads);
  set_kernel_choices(ctx.kernels);
  profile::set_enabled(ctx.profile);
}

}  // namespace vidax
