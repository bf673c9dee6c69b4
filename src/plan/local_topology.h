// The `local` topology: this machine running N processes (`mpirun -n N`), measured here. Each
// process gets cores / N OpenMP threads (one when oversubscribed, then a share cores / N of a
// core), so one "device" is that share of the CPU: its GEMM and attention rates are timed on the
// request's own sizes with that many threads (vidax's kernels, the ones the run will use), its
// memory bandwidth by a streaming pass; one real block, timed at the rows a rank runs under each
// sequence split (as many copies at once as there are processes, their throughput), gives how
// much slower the runtime is than those rates at those rows, which divides the shares there.
// The processes talk through shared memory: each has one port (link) whose bandwidth and the
// collectives' latency come from `vidax bench comm --json` run under the same mpirun (its
// alpha_beta fit), or from a memory-copy estimate when not given; from the same JSON, the
// collectives as they run between computing ranks (per kind and group size: the topology's
// collective_fits) and the waits for a group's last rank (collective_waits). Not thread-safe
// (sets OpenMP's thread count while measuring).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "models/wan/dit.h"
#include "models/wan/vae_config.h"
#include "plan/topology.h"

namespace vidax::plan {

struct LocalCalibration {
  int processes = 1;
  int cores = 0;          // 0: OpenMP's maximum threads
  wan::DitConfig config;  // sizes to time the kernels at
  int64_t rows = 1024;    // GEMM rows (a rank's tokens, capped): the topology's own shares
  // Further per-rank row counts (those of the other sequence splits) at which the GEMM and a real
  // block are timed again: the topology's efficiency_by_rows (empty: none).
  std::vector<int64_t> rows_set;
  int64_t tokens = 1024;  // attention length (capped)
  // The request's frames: the VAE's convolutions are timed at them (at most 416x240 pixels), and
  // with `vae` one real decode of two latent frames in `vae_precision` (random weights).
  int64_t width = 832, height = 480;
  std::optional<wan::VaeConfig> vae;
  wan::Precision vae_precision = wan::Precision::kBF16;
  wan::Precision precision = wan::Precision::kBF16;
  std::string comm_json;  // the text of `vidax bench comm --json` (optional)
};

Topology local_topology(const LocalCalibration& calibration);

}  // namespace vidax::plan
