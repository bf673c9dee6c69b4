// Link emulation: run a mesh on this machine as if its collectives crossed a modelled topology.
// Every collective of the mesh's groups is stretched to the duration the link model gives it
// (plan/link_sim.h) under the placement, on the groups' real messages: the runtime, its
// collectives and their bytes are the real ones, only their wall time is made the modelled one
// when that is longer. This tests the planner's ranking of meshes and placements on topologies
// this machine does not have (docs/planner.md). Groups that are not an axis of the mesh (the
// world, the text encoder's and VAE's own groups) run unstretched.
//
//   VIDAX_SIMULATE_LINKS=topology.json|preset   [VIDAX_SIMULATE_PLACEMENT=d0,d1,...]
//
// The placement gives the device of each world rank (default: rank r on device r).
// Thread-safe once installed (the model is shared under a mutex).
#pragma once

#include <string>

#include "dist/mesh.h"
#include "plan/link_sim.h"
#include "plan/topology.h"

namespace vidax::plan {

// Parses "0,2,1,3" into a placement of `ranks` ranks over `devices` devices (a permutation);
// InputError naming `source` otherwise. Empty: rank order.
Placement parse_placement(const std::string& text, int ranks, int devices,
                          const std::string& source);

// Installs the stretch (dist::set_collective_stretch) for `mesh` on `topology` under `placement`.
void install_link_emulation(const Topology& topology, const dist::MeshSpec& mesh,
                            const Placement& placement);

}  // namespace vidax::plan
