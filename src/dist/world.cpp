#include "dist/world.h"

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "core/error.h"
#include "dist/mpi_world.h"
#include "io/temp_paths.h"

namespace vidax::dist {
namespace {

std::unique_ptr<Group> g_world;
bool g_mpi = false;
int g_local = 1;
double g_timeout = 600.0;

int launcher_world_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    if (const char* v = std::getenv(var); v && *v) return std::atoi(v);
  }
  return 1;
}

}  // namespace

double collective_timeout_seconds() { return g_timeout; }
void set_collective_timeout_seconds(double seconds) { g_timeout = seconds; }

bool mpi_built() {
#ifdef VIDAX_HAVE_MPI
  return true;
#else
  return false;
#endif
}

void init_world(int* argc, char*** argv) {
  if (g_world) return;
  const int launched = launcher_world_size();
#ifdef VIDAX_HAVE_MPI
  if (launched > 1) {
    mpi_init(argc, argv);
    g_world = make_mpi_world_group();
    g_mpi = true;
    g_local = mpi_local_size();
    return;
  }
#else
  (void)argc;
  (void)argv;
  if (launched > 1)
    throw_input_error("started as one of ", launched,
                      " processes (mpirun), but this vidax was built without MPI "
                      "(configure with -DVIDAX_MPI=ON and install libopenmpi-dev)");
#endif
  g_world = make_self_group("world");
}

void finalize_world() {
#ifdef VIDAX_HAVE_MPI
  if (g_mpi) {
    g_world.reset();
    mpi_finalize();
    g_mpi = false;
  }
#endif
}

Group& world() {
  if (!g_world) g_world = make_self_group("world");
  return *g_world;
}

bool world_is_mpi() { return g_mpi; }

bool collectives_from_any_thread() {
#ifdef VIDAX_HAVE_MPI
  if (g_mpi) return mpi_thread_multiple();
#endif
  return true;
}
int local_process_count() { return g_local; }

void fail_job(const std::string& message, bool print) {
  if (print) {
    if (g_mpi && world().size() > 1) {
      std::fprintf(stderr, "vidax: error: rank %d: %s\n", world().rank(), message.c_str());
    } else {
      std::fprintf(stderr, "vidax: error: %s\n", message.c_str());
    }
  }
  std::fflush(stderr);
  remove_registered_temp_paths();
  if (g_mpi && world().size() > 1) world().abort_job(1);
  std::exit(1);
}

}  // namespace vidax::dist
