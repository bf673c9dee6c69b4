// The --mesh option shared by the commands that run across processes (run dit, run denoise,
// bench dit, generate), and the start-of-job checks every rank makes before any weight is read:
// the mesh against the world size and the model, and a fingerprint exchange that refuses ranks
// started from different binaries, arguments or input files.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "dist/mesh.h"

namespace vidax::cli {

struct MeshArgs {
  std::string spec;  // "" = one process
};
void add_mesh_args(CLI::App* cmd, MeshArgs& args);

// Parses and validates --mesh against the world (InputError, the same on every rank), exchanges
// the fingerprint (InputError naming the field and the ranks that differ), then splits the
// world into the mesh's groups.
std::unique_ptr<dist::Mesh> make_mesh(const MeshArgs& args);

// The model-dependent checks (heads divisible by ulysses, cfg=2 needs guidance).
void check_mesh_for_model(const dist::Mesh& mesh, int64_t heads, bool has_cfg);

// Whether this process writes outputs and prints progress (world rank 0).
bool is_output_rank();

// The command line of this process, recorded by main() for the fingerprint.
void set_command_line(int argc, char** argv);

}  // namespace vidax::cli
