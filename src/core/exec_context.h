// The execution context: everything about *how* the models run that is not the model itself:
// OpenMP threads, the kernel overrides, whether the profiler records, and the device mesh this
// process is part of (dist/mesh.h). The CLI builds one at start (the environment variables only
// give the overrides' defaults, read once there: ExecContext::from_environment), applies the
// process-wide parts once (kernels/cpu/kernel_choices.h: apply_exec_context) and hands it to the
// models and the pipeline, which read the mesh from it. A default-constructed context is one
// process with OpenMP's default threads and the machine's own kernel choices, which is what
// library users and tests get without asking. Scratch the kernels keep per thread is freed
// between phases by release_thread_scratch() (core/thread_scratch.h).
//
// Thread-safety: a plain value; the mesh it points to is used by the thread that issues
// collectives.
#pragma once

#include <string>

namespace vidax::dist {
class Mesh;
}

namespace vidax {

// Kernel overrides for tests and comparisons; empty / -1 / false: chosen by the machine.
struct KernelChoices {
  std::string gemm;           // VIDAX_GEMM: "onednn" (oneDNN's bf16 kernels) | "widened"
  int bf16_dot = -1;          // VIDAX_BF16_DOT: 1 use vdpbf16ps where present, 0 do not
  bool conv_widened = false;  // VIDAX_CONV=widened: bf16 convolutions widened to f32
  static KernelChoices from_environment();
};

struct ExecContext {
  int threads = 0;                   // OpenMP threads of this process (0: OpenMP's default)
  KernelChoices kernels;             // applied process-wide by apply_exec_context
  bool profile = false;              // record profile::ScopedTimer buckets
  const dist::Mesh* mesh = nullptr;  // null: a single process
  // Kernel choices from the environment, everything else default.
  static ExecContext from_environment();
};

}  // namespace vidax
