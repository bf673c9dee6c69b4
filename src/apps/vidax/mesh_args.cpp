#include "apps/vidax/mesh_args.h"

#include <sys/stat.h>

#include <array>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "core/sha256.h"
#include "dist/world.h"
#include "kernels/cpu/flash_attention.h"

namespace vidax::cli {
namespace {

std::vector<std::string> g_args;

// One 64-bit digest per field that must agree across ranks.
enum Field { kBinary, kArguments, kInputFiles, kKernels, kFieldCount };
const char* field_name(int f) {
  switch (f) {
    case kBinary:
      return "the vidax binary (/proc/self/exe)";
    case kArguments:
      return "the command-line arguments";
    case kInputFiles:
      return "the input files named on the command line (size, modification time)";
    case kKernels:
      return "the kernel path chosen for this CPU";
    default:
      return "?";
  }
}

uint64_t digest64(const std::string& text) {
  Sha256 h;
  h.update(text.data(), text.size());
  const auto d = h.finish();
  uint64_t v = 0;
  std::memcpy(&v, d.data(), sizeof(v));
  return v;
}

std::string file_bytes(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::array<int64_t, kFieldCount> fingerprint() {
  std::array<int64_t, kFieldCount> fp{};
  fp[kBinary] = static_cast<int64_t>(digest64(file_bytes("/proc/self/exe")));
  std::string args, files;
  for (size_t i = 1; i < g_args.size(); ++i) {
    args += g_args[i] + '\0';
    struct stat st {};
    if (::stat(g_args[i].c_str(), &st) == 0 && S_ISREG(st.st_mode))
      files += g_args[i] + ':' + std::to_string(st.st_size) + ':' +
               std::to_string(st.st_mtim.tv_sec) + '\0';
  }
  fp[kArguments] = static_cast<int64_t>(digest64(args));
  fp[kInputFiles] = static_cast<int64_t>(digest64(files));
  fp[kKernels] = static_cast<int64_t>(digest64(flash_attention_target()));
  return fp;
}

}  // namespace

void set_command_line(int argc, char** argv) { g_args.assign(argv, argv + argc); }

void add_mesh_args(CLI::App* cmd, MeshArgs& args) {
  cmd->add_option("--mesh", args.spec,
                  "device mesh over the mpirun processes: cfg=C,ring=R,ulysses=U (default: one "
                  "process); see docs/mesh.md");
}

std::unique_ptr<dist::Mesh> make_mesh(const MeshArgs& args) {
  dist::Group& world = dist::world();
  const dist::MeshSpec spec = dist::parse_mesh_spec(args.spec);
  dist::validate_mesh(spec, world.size());
  if (world.size() == 1) return dist::Mesh::single();
  // Fingerprints: every rank sees every rank's, so every rank reaches the same verdict.
  const auto mine = fingerprint();
  std::vector<int64_t> all(static_cast<size_t>(world.size() * kFieldCount));
  world.all_gather(mine.data(), all.data(), kFieldCount, DType::kI64);
  for (int f = 0; f < kFieldCount; ++f) {
    std::string differ;
    for (int r = 1; r < world.size(); ++r)
      if (all[static_cast<size_t>(r * kFieldCount + f)] != all[static_cast<size_t>(f)])
        differ.append(differ.empty() ? "" : ",").append(std::to_string(r));
    if (!differ.empty())
      throw_job_input_error("the ranks were not started alike: ", field_name(f),
                            " differ between rank 0 and rank(s) ", differ);
  }
  return std::make_unique<dist::Mesh>(spec, world);
}

void check_mesh_for_model(const dist::Mesh& mesh, int64_t heads, bool has_cfg) {
  dist::validate_mesh_for_model(mesh.spec(), heads, has_cfg);
}

bool is_output_rank() { return dist::world().rank() == 0; }

}  // namespace vidax::cli
