// The physical placements of a mesh on a topology: which device each world rank runs on. The
// runtime's rank order is fixed (dist/mesh.h: r = ((c R + g) U + u) T + t), so a placement is
// realised by starting rank r on its device (an MPI rankfile), without touching the runtime.
//
// Enumerated: every order of the mesh's axes (which axis is innermost, so lands on neighbouring
// devices) times every order of the topology's device numbering (on a torus, which dimension
// varies fastest), deduplicated. The first placement is the rank order itself (rank r on device
// r), what a planner that only sees logical meshes gets. Pure; thread-safe.
#pragma once

#include <vector>

#include "dist/mesh.h"
#include "plan/link_sim.h"
#include "plan/topology.h"

namespace vidax::plan {

std::vector<Placement> enumerate_placements(const Topology& topology, const dist::MeshSpec& mesh);

// The rank-order placement (rank r on device r).
Placement rank_order_placement(const Topology& topology, const dist::MeshSpec& mesh);

// How each axis's group holding rank 0 lies on the topology: "ulysses 2x2, cfg 1x2" on a torus
// (its extent per dimension), "tp in node, cfg across nodes" on a switch fabric.
std::string describe_placement(const Topology& topology, const dist::MeshSpec& mesh,
                               const std::vector<int>& device_of_rank);

}  // namespace vidax::plan
