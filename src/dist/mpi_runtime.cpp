// Starting and ending Open MPI for the process (built only with VIDAX_MPI).
#define OMPI_SKIP_MPICXX 1  // the C API only
#include <mpi.h>

#include <cstdio>
#include <cstdlib>

#include "dist/mpi_world.h"

namespace vidax::dist {

namespace {
bool g_thread_multiple = false;
}  // namespace

// MPI_THREAD_MULTIPLE: a sharded DiT's block loader gathers weights on its own communicator from
// its own thread while the main thread runs the model's collectives.
void mpi_init(int* argc, char*** argv) {
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "vidax: error: MPI_Init_thread failed\n");
    std::exit(1);
  }
  g_thread_multiple = provided >= MPI_THREAD_MULTIPLE;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

bool mpi_thread_multiple() { return g_thread_multiple; }

void mpi_finalize() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

int mpi_local_size() {
  MPI_Comm local = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int n = 1;
  MPI_Comm_size(local, &n);
  MPI_Comm_free(&local);
  return n;
}

}  // namespace vidax::dist
