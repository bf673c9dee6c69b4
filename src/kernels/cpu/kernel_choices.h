// The kernel overrides in force in this process (core/exec_context.h: KernelChoices). Kernel
// dispatch is process-wide (a CPU has one set of units), so the choices are set once, by the CLI
// through apply_exec_context, before any kernel runs; without that they are the environment's,
// read at each use (KernelChoices::from_environment; tests switch them between cases).
// Thread-safety: set before kernels run; read-only afterwards.
#pragma once

#include "core/exec_context.h"

namespace vidax {

KernelChoices kernel_choices();
void set_kernel_choices(const KernelChoices& choices);

// The process-wide parts of a context: OpenMP threads (when > 0), the kernel choices, the
// profiler switch. The mesh is not process state: models read it from their context.
void apply_exec_context(const ExecContext& ctx);

}  // namespace vidax
