// The processes of one vidax job. `mpirun -n N vidax ...` starts N processes; init_world() makes
// them one MPI world (when the build has Open MPI), otherwise the world is a single process.
// The CLI calls init_world() first thing and finalize_world() last; everything else reaches the
// world through the execution context (core/exec_context.h) or world().
//
// Thread-safety: init/finalize from the main thread only; world() after init from the thread that
// issues collectives.
#pragma once

#include <string>

#include "dist/group.h"

namespace vidax::dist {

// Starts MPI when this process is one of several started by mpirun (OMPI_COMM_WORLD_SIZE > 1)
// and the build has MPI. Throws InputError when started as one of several processes by a build
// without MPI (each would otherwise run the whole job alone).
void init_world(int* argc, char*** argv);
// Ends MPI (collective: every rank calls it on a normal exit).
void finalize_world();

Group& world();
bool world_is_mpi();
// Whether a second thread may run collectives on its own group (MPI_THREAD_MULTIPLE granted, or
// no MPI): what a sharded DiT's block loader needs.
bool collectives_from_any_thread();
bool mpi_built();
// Processes of this job on this node (1 without MPI): the default OpenMP threads per rank are
// the cores divided by this.
int local_process_count();

// Seconds a collective may wait for its peers (--dist-timeout; default 600) before every process
// of the job is ended with an error naming the collective.
void set_collective_timeout_seconds(double seconds);

// Ends the job after an error on this rank: prints `message` (one line, prefixed "vidax: error:"
// and, with several ranks, the rank) when `print`, then exits every process with status 1
// (MPI_Abort with several ranks, so no peer waits forever).
[[noreturn]] void fail_job(const std::string& message, bool print = true);

}  // namespace vidax::dist
