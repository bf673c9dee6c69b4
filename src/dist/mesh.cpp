#include "dist/mesh.h"

#include <cstdlib>

#include "core/error.h"
#include "dist/world.h"

namespace vidax::dist {

std::string MeshSpec::str() const {
  return str_cat("cfg=", cfg, ",ring=", ring, ",ulysses=", ulysses, ",tp=", tp);
}

MeshSpec parse_mesh_spec(const std::string& text, const std::string& flag) {
  MeshSpec spec;
  if (text.empty() || text == "1" || text == "single") return spec;
  bool seen[4] = {false, false, false, false};
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = text.find(',', pos);
    const std::string part =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const size_t eq = part.find('=');
    if (eq == std::string::npos)
      throw_job_input_error(flag,
                            ": expected AXIS=N[,AXIS=N]* with axes cfg, ring, ulysses (or sp), "
                            "tp; got '",
                            part, "' in '", text, "'");
    const std::string axis = part.substr(0, eq), value = part.substr(eq + 1);
    char* end = nullptr;
    const long n = std::strtol(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || n < 1 || n > 65536)
      throw_job_input_error(flag, ": axis '", axis, "' needs a positive integer, got '", value,
                            "'");
    int* slot = nullptr;
    int index = 0;
    if (axis == "cfg") {
      slot = &spec.cfg, index = 0;
    } else if (axis == "ring") {
      slot = &spec.ring, index = 1;
    } else if (axis == "ulysses" || axis == "sp") {
      slot = &spec.ulysses, index = 2;
    } else if (axis == "tp") {
      slot = &spec.tp, index = 3;
    } else {
      throw_job_input_error(flag, ": unknown axis '", axis,
                            "' (expected cfg, ring, ulysses (or sp), tp)");
    }
    if (seen[index]) throw_job_input_error(flag, ": axis '", axis, "' given twice in '", text, "'");
    seen[index] = true;
    *slot = static_cast<int>(n);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return spec;
}

void validate_mesh(const MeshSpec& spec, int world_size, const std::string& flag) {
  if (spec.cfg > 2)
    throw_job_input_error(flag, ": cfg=", spec.cfg,
                          " (classifier-free guidance has 2 branches: "
                          "cfg is 1 or 2)");
  if (spec.size() != world_size)
    throw_job_input_error(flag, ": ", spec.str(), " has ", spec.size(), " ranks, but the job has ",
                          world_size, " process", world_size == 1 ? "" : "es",
                          mpi_built() ? str_cat(" (start it with mpirun -n ", spec.size(), ")")
                                      : std::string(" (and this vidax was built without MPI: "
                                                    "configure with -DVIDAX_MPI=ON)"));
}

void validate_mesh_for_model(const MeshSpec& spec, int64_t heads, bool has_cfg,
                             const std::string& flag) {
  if (heads % (spec.ulysses * spec.tp) != 0)
    throw_job_input_error(flag, ": ulysses=", spec.ulysses,
                          spec.tp > 1 ? str_cat(" x tp=", spec.tp) : "",
                          " does not divide the model's ", heads, " attention heads");
  if (spec.cfg == 2 && !has_cfg)
    throw_job_input_error(flag,
                          ": cfg=2 needs classifier-free guidance (a negative context and a "
                          "guide scale other than 1)");
}

MeshCoord mesh_coord(const MeshSpec& spec, int rank) {
  MeshCoord k;
  k.tp = rank % spec.tp;
  rank /= spec.tp;
  k.ulysses = rank % spec.ulysses;
  rank /= spec.ulysses;
  k.ring = rank % spec.ring;
  k.cfg = rank / spec.ring;
  return k;
}

int mesh_rank(const MeshSpec& spec, const MeshCoord& k) {
  return ((k.cfg * spec.ring + k.ring) * spec.ulysses + k.ulysses) * spec.tp + k.tp;
}

Mesh::Mesh(const MeshSpec& spec, Group& world) : spec_(spec), world_(&world) {
  VIDAX_CHECK(spec.size() == world.size(), "mesh ", spec.str(), " on a world of ", world.size());
  const int r = world.rank();
  const int T = spec.tp, U = spec.ulysses, R = spec.ring;
  const MeshCoord k = mesh_coord(spec, r);
  const int t = k.tp, u = k.ulysses, g = k.ring, c = k.cfg;
  // Each group keeps the other coordinates fixed; its rank order follows the axis coordinate.
  cfg_ = world.split((g * U + u) * T + t, c, "cfg");
  sp_ = world.split(c * T + t, g * U + u, "sp");
  ulysses_ = world.split((c * R + g) * T + t, u, "ulysses");
  ring_ = world.split((c * U + u) * T + t, g, "ring");
  tp_ = world.split((c * R + g) * U + u, t, "tp");
}

CommStats Mesh::stats() const {
  CommStats s = world_->stats();
  for (const Group* g : {cfg_.get(), sp_.get(), ulysses_.get(), ring_.get(), tp_.get()})
    s.add(g->stats());
  return s;
}

void Mesh::reset_stats() {
  world_->reset_stats();
  for (Group* g : {cfg_.get(), sp_.get(), ulysses_.get(), ring_.get(), tp_.get()}) g->reset_stats();
}

std::unique_ptr<Mesh> Mesh::single() {
  std::unique_ptr<Mesh> m(new Mesh());
  m->own_world_ = make_self_group("world");
  m->world_ = m->own_world_.get();
  m->cfg_ = make_self_group("cfg");
  m->sp_ = make_self_group("sp");
  m->ulysses_ = make_self_group("ulysses");
  m->ring_ = make_self_group("ring");
  m->tp_ = make_self_group("tp");
  return m;
}

}  // namespace vidax::dist
