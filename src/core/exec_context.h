// The execution context: everything about *how* a model runs that is not the model itself —
// OpenMP threads, whether the profiler records, and the device mesh this process is part of
// (dist/mesh.h). The CLI builds one (environment variables only set its defaults, read once
// there) and hands it to the models; a default-constructed context is one process with
// OpenMP's default threads, which is what library users and tests get without asking.
//
// Thread-safety: an immutable value once built; the mesh it points to is used by the thread
// that issues collectives.
#pragma once

namespace vidax::dist {
class Mesh;
}

namespace vidax {

struct ExecContext {
  int threads = 0;                   // OpenMP threads of this process (0: OpenMP's default)
  bool profile = false;              // record profile::ScopedTimer buckets
  const dist::Mesh* mesh = nullptr;  // null: a single process
};

}  // namespace vidax
