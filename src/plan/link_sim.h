// Link-level cost of the collectives of a schedule on a topology, for one placement of the
// mesh's ranks on devices. Every group of a collective's mesh axis runs it at the same time (all
// tp groups all-reduce at once), so their messages share links. Each collective is played as the
// rounds dist::Group runs (dist/group.cpp, dist/mpi_group.cpp):
//   all_to_all / all_gather   one round: every member sends to every other member;
//   all_reduce                two rounds of n-1 messages of 1/n of the vector each (an
//                             all-to-all of blocks, then an all-gather of the reduced blocks);
//   send_recv (ring)          one round per call: member i sends to i+1;
//   broadcast                 one round: the root sends to every member.
// A round takes  collective_latency + the longest route's latency + max over links of
// (bytes on the link / its bandwidth). Where the topology has a measured fit for the kind
// (Topology::collective_fits, the `local` topology: this machine's collectives between
// computing ranks) and the collective runs between ops (not a background prefetch), it takes at
// least the fit's latency + the bytes one rank sends / the fit's rate, at the nearest measured
// group size: the links' time is a floor set by the fabric, the fit one set by the machine (with
// a modelled fabric under link emulation, the real collective runs first, then is stretched).
// Pure; thread-safe.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "dist/mesh.h"
#include "dist/schedule.h"
#include "plan/topology.h"

namespace vidax::plan {

// Which device each world rank runs on (rank order of dist/mesh.h).
struct Placement {
  std::vector<int> device_of_rank;
  std::string description;  // how the mesh axes map onto the topology
};

// World ranks of each group of `axis`, in group rank order (dist/mesh.h's rank formula).
std::vector<std::vector<int>> axis_groups(const dist::MeshSpec& mesh, dist::MeshAxis axis);

struct CollectiveTime {
  double seconds = 0;             // all calls of the op
  double busiest_link_bytes = 0;  // per round, the most loaded link
  int rounds = 0;
};

// One scheduled collective (all its calls) under `placement`.
CollectiveTime collective_time(const Topology& topology, const Placement& placement,
                               const dist::MeshSpec& mesh, const dist::ScheduledOp& op);

// The same, memoised per (axis, message pattern): link loads scale with the bytes, so each
// pattern is routed once per placement. Not thread-safe (the memo); one per thread.
class LinkModel {
 public:
  // `topology` must outlive the model; the placement is copied.
  LinkModel(const Topology& topology, Placement placement, const dist::MeshSpec& mesh)
      : topo_(topology), placement_(std::move(placement)), mesh_(mesh) {}
  CollectiveTime time(const dist::ScheduledOp& op);

 private:
  struct Pattern {
    double seconds_per_byte = 0, bytes_per_byte = 0, latency = 0;
  };
  const Topology& topo_;
  Placement placement_;
  dist::MeshSpec mesh_;
  std::vector<std::pair<int, Pattern>> memo_;  // key: axis * 16 + kind
};

// The bytes each link carries in one round of `op` (for tests and --explain): index = link.
std::vector<double> round_link_bytes(const Topology& topology, const Placement& placement,
                                     const dist::MeshSpec& mesh, const dist::ScheduledOp& op);

}  // namespace vidax::plan
