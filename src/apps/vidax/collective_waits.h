// What a collective costs beyond its transfer when the processes compute between collectives:
// the wait for the last member of the group to arrive. With one core per process it is the
// jitter between ranks (small); with more processes than cores the ranks are time-sliced, a
// group meets only when its last member has been scheduled through its compute, and the cores
// can sit idle in between (ranks that arrived early yield, the ones still computing share what
// is left). The planner adds it per collective as a function of the compute since the previous
// one (plan/topology.h `collective_waits`).
//
// Measured with the real collectives: every rank runs `compute` seconds of bf16 GEMMs of a DiT
// block's width (as wall time with all ranks computing at once, so at its share of the cores;
// the weights stream from memory as in a forward), then a one-float
// all-reduce in groups of `group` consecutive ranks (every group at once, as a mesh axis runs);
// wait = (that loop's time per iteration) - (the same compute without collectives) - (the
// all-reduce alone). Medians over rounds, the slowest rank's time. Collective: every rank of
// `world` must call it with the same arguments.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "dist/group.h"

namespace vidax::cli {

struct CollectiveWaitOptions {
  std::vector<double> compute_seconds = {0.001, 0.004, 0.016, 0.064, 0.256};
  double seconds_per_point = 0.4;  // timed loop length per measurement
  int rounds = 3;                  // medians over rounds
};

// [{"group": g, "compute_us": ..., "wait_us": ..., "free_us": ..., "collective_us": ...}, ...]
// for every group size g >= 2 dividing the world size, compute increasing; empty for one rank.
nlohmann::json measure_collective_waits(dist::Group& world, const CollectiveWaitOptions& options);

// What a collective costs between computing ranks against what it costs between idle ones (bench
// comm's sweep): every rank computes `compute_seconds` of GEMMs, then calls the collective on
// groups of g consecutive ranks (every group at once), for each kind, each size and every group
// size g >= 2 dividing the world. With more processes than cores the transfer runs while other
// ranks compute on the same cores (shared-memory copies need both ends scheduled), which an idle
// sweep does not see. loaded = (compute + collective) - compute alone; idle = the collective
// alone; per iteration, the slowest rank's, medians over rounds.
struct LoadedOptions {
  double compute_seconds = 0.016;
  std::vector<int64_t> bytes_per_peer = {8, int64_t{1} << 20, int64_t{4} << 20};
  double seconds_per_point = 0.3;
  int rounds = 3;
};
// [{"collective", "group", "bytes_sent_per_rank", "compute_us", "loaded_us", "idle_us"}, ...]
nlohmann::json measure_loaded_collectives(dist::Group& world, const LoadedOptions& options);

}  // namespace vidax::cli
