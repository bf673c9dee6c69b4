// The device mesh: how the processes of a job split one generation.
//
//   --mesh cfg=C,ring=R,ulysses=U[,tp=T]      (unnamed axes are 1; sp=N is ulysses=N)
//
// Axes, outer to inner: cfg x ring x ulysses x tp. World rank
//   r = ((c * R + g) * U + u) * T + t
// so with mpirun's default by-slot placement consecutive ranks share a node: tp and Ulysses
// (the chattiest axes) stay inside a node, ring and cfg cross nodes first.
//   cfg      classifier-free guidance branches: cfg rank 0 runs the conditional prediction,
//            rank 1 the unconditional; predictions are exchanged once per step.
//   ring     sequence shards whose keys/values travel around a ring (ring attention).
//   ulysses  sequence shards exchanged to head shards for self-attention (all-to-all).
//   tp       tensor parallel (Megatron): each tp rank holds 1/T of every block's heads and FFN
//            columns; the row-split linears' partial sums are all-reduced (dist/tensor_parallel.h).
// The sequence-parallel group `sp` is ring x ulysses (sp rank = g * U + u): tokens are dealt
// to sp ranks in that order, ceil(L / sp) each, padding at the end.
//
// Thread-safety: a Mesh is built collectively by every rank of the world and then used by the
// thread that issues collectives.
#pragma once

#include <memory>
#include <string>

#include "dist/group.h"

namespace vidax::dist {

struct MeshSpec {
  int cfg = 1, ring = 1, ulysses = 1, tp = 1;
  int size() const { return cfg * ring * ulysses * tp; }
  int sp() const { return ring * ulysses; }
  std::string str() const;  // canonical "cfg=2,ring=1,ulysses=2,tp=1"
  bool operator==(const MeshSpec&) const = default;
};

// A world rank's coordinates on the mesh's axes, and back (the rank formula above).
struct MeshCoord {
  int cfg = 0, ring = 0, ulysses = 0, tp = 0;
};
MeshCoord mesh_coord(const MeshSpec& spec, int rank);
int mesh_rank(const MeshSpec& spec, const MeshCoord& coord);

// Parses `text` ("cfg=2,ulysses=4"; "" or "1" is the single-process mesh). Throws InputError
// naming `flag` and the bad part.
MeshSpec parse_mesh_spec(const std::string& text, const std::string& flag = "--mesh");

// Checks the mesh against the job before any work starts (the same answer on every rank):
// product = world size, cfg in {1, 2}. Throws InputError naming `flag`.
void validate_mesh(const MeshSpec& spec, int world_size, const std::string& flag = "--mesh");

// The model-dependent checks: `heads` divisible by ulysses * tp; cfg = 2 needs guidance
// (`has_cfg`). Throws InputError naming `flag`.
void validate_mesh_for_model(const MeshSpec& spec, int64_t heads, bool has_cfg,
                             const std::string& flag = "--mesh");

class Mesh {
 public:
  // Splits `world` into the axis groups (collective over `world`). `spec` must be validated.
  Mesh(const MeshSpec& spec, Group& world);
  // The single-process mesh over size-1 groups.
  static std::unique_ptr<Mesh> single();

  const MeshSpec& spec() const { return spec_; }
  Group& world() const { return *world_; }
  Group& cfg() const { return *cfg_; }          // the ranks with the same (ring, ulysses, tp)
  Group& sp() const { return *sp_; }            // ring x ulysses of one cfg branch and tp rank
  Group& ulysses() const { return *ulysses_; }  // one ring shard's Ulysses group
  Group& ring() const { return *ring_; }        // one Ulysses rank's ring
  Group& tp() const { return *tp_; }  // the ranks holding the same rows (cfg, ring, ulysses)

  // Collective statistics of every group of the mesh, summed (dist/group.h).
  CommStats stats() const;
  void reset_stats();

  int cfg_rank() const { return cfg_->rank(); }
  int sp_rank() const { return sp_->rank(); }
  bool single_process() const { return spec_.size() == 1; }

 private:
  Mesh() = default;
  MeshSpec spec_;
  std::unique_ptr<Group> own_world_;
  Group* world_ = nullptr;
  std::unique_ptr<Group> cfg_, sp_, ulysses_, ring_, tp_;
};

}  // namespace vidax::dist
