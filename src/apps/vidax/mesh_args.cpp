#include "apps/vidax/mesh_args.h"

#include <sys/stat.h>
#include <unistd.h>  // environ

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "core/sha256.h"
#include "dist/world.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/flash_attention.h"
#include "plan/link_emulation.h"

namespace vidax::cli {
namespace {

std::vector<std::string> g_args;

// One 64-bit digest per field that must agree across ranks.
enum Field { kBinary, kArguments, kInputFiles, kEnvironment, kKernels, kFieldCount };
const char* field_name(int f) {
  switch (f) {
    case kBinary:
      return "the vidax binary (/proc/self/exe)";
    case kArguments:
      return "the command-line arguments";
    case kInputFiles:
      return "the input files and folders named on the command line (sizes, modification times)";
    case kEnvironment:
      return "the VIDAX_* environment variables";
    case kKernels:
      return "the kernels this CPU runs (AMX, AVX512-BF16, SIMD target)";
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

// "path:size:mtime" of a file, or of every file below a folder (a model folder), at most 10,000.
void describe_path(const std::string& path, std::string& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto stamp = [&](const fs::path& p) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
    out += p.string() + ':' + std::to_string(st.st_size) + ':' + std::to_string(st.st_mtim.tv_sec) +
           '.' + std::to_string(st.st_mtim.tv_nsec) + '\0';
  };
  if (fs::is_regular_file(path, ec)) {
    stamp(path);
  } else if (fs::is_directory(path, ec)) {
    int n = 0;
    for (auto it = fs::recursive_directory_iterator(path, ec);
         !ec && it != fs::recursive_directory_iterator() && n < 10000; it.increment(ec), ++n)
      stamp(it->path());
  }
}

std::array<int64_t, kFieldCount> fingerprint() {
  std::array<int64_t, kFieldCount> fp{};
  fp[kBinary] = static_cast<int64_t>(digest64(file_bytes("/proc/self/exe")));
  std::string args, files, env;
  // Output paths are not inputs: a stale output on one node only must not refuse the run.
  auto is_output_flag = [](const std::string& a) {
    return a == "-o" || a == "--output" || a == "--out";
  };
  for (size_t i = 1; i < g_args.size(); ++i) {
    const std::string& a = g_args[i];
    args += a + '\0';
    if (is_output_flag(g_args[i - 1])) continue;
    const size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      if (!is_output_flag(a.substr(0, eq))) describe_path(a.substr(eq + 1), files);  // --flag=path
    } else {
      describe_path(a, files);
    }
  }
  std::vector<std::string> vars;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::string_view(*e).rfind("VIDAX_", 0) == 0) vars.emplace_back(*e);
  std::sort(vars.begin(), vars.end());
  for (const auto& v : vars) env += v + '\0';
  fp[kArguments] = static_cast<int64_t>(digest64(args));
  fp[kInputFiles] = static_cast<int64_t>(digest64(files));
  fp[kEnvironment] = static_cast<int64_t>(digest64(env));
  fp[kKernels] = static_cast<int64_t>(
      digest64(str_cat(flash_attention_target(), amx_bf16_usable(), bf16_dot_product_fast(),
                       cpu_has_avx512_bf16(), cpu_has_avx512f(), cpu_has_avx2_fma())));
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
  if (world.size() == 1) {
    const dist::MeshSpec spec = dist::parse_mesh_spec(args.spec);
    dist::validate_mesh(spec, 1);
    return dist::Mesh::single();
  }
  // Fingerprints first: every rank sees every rank's, so every rank reaches the same verdict,
  // and after it every rank holds the same arguments, so the mesh checks fail alike everywhere.
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
  const dist::MeshSpec spec = dist::parse_mesh_spec(args.spec);
  dist::validate_mesh(spec, world.size());
  // Link emulation (plan/link_emulation.h): the collectives take their modelled durations.
  if (const char* links = std::getenv("VIDAX_SIMULATE_LINKS"); links != nullptr && *links) {
    const plan::Topology topo = plan::load_topology(links, "VIDAX_SIMULATE_LINKS");
    const char* place = std::getenv("VIDAX_SIMULATE_PLACEMENT");
    plan::install_link_emulation(topo, spec,
                                 plan::parse_placement(place != nullptr ? place : "", world.size(),
                                                       topo.devices(), "VIDAX_SIMULATE_PLACEMENT"));
  }
  return std::make_unique<dist::Mesh>(spec, world);
}

void check_mesh_for_model(const dist::Mesh& mesh, int64_t heads, bool has_cfg) {
  dist::validate_mesh_for_model(mesh.spec(), heads, has_cfg);
}

bool is_output_rank() { return dist::world().rank() == 0; }

}  // namespace vidax::cli
