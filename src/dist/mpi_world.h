// Private to dist/: the hooks world.cpp uses to start and end Open MPI (mpi_group.cpp,
// mpi_runtime.cpp; built only with VIDAX_MPI) and the collective timeout every backend reads.
#pragma once

#include <memory>

#include "dist/group.h"

namespace vidax::dist {

// Seconds a collective may wait for its peers before the job is ended (world.h).
double collective_timeout_seconds();

#ifdef VIDAX_HAVE_MPI
void mpi_init(int* argc, char*** argv);  // MPI_Init_thread(MULTIPLE)
bool mpi_thread_multiple();              // whether MPI granted it
void mpi_finalize();
int mpi_local_size();  // processes of the job on this node
std::unique_ptr<Group> make_mpi_world_group();
#endif

}  // namespace vidax::dist
