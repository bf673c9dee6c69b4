// AoiZora for vidax: choose the mesh and its physical placement for one request on one machine.
//
//   1. enumerate every mesh the runtime executes on N devices (cfg x ring x ulysses x tp with the
//      runtime's own checks, weights resident or sharded) and reject, naming the constraint,
//      those that break one or do not fit a device's memory;
//   2. prune with a cheap bound (compute at peak, the bytes each rank sends at its fastest link);
//   3. build each survivor's per-rank schedule of one step (models/wan/dit_schedule.h, the
//      declaration the runtime executes) and price its compute on the device;
//   4. enumerate its placements (plan/placement.h), simulate every collective's link load
//      (plan/link_sim.h) and rank by predicted step time.
// Nothing here runs a model. Pure; thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dist/mesh.h"
#include "models/clip/clip_config.h"
#include "models/wan/dit.h"
#include "models/wan/t5_config.h"
#include "models/wan/vae_config.h"
#include "pipeline/video_request.h"
#include "plan/link_sim.h"
#include "plan/topology.h"

namespace vidax::plan {

struct PlanRequest {
  std::string model;  // what it was built from (a preset name or a folder)
  wan::DitConfig config;
  int64_t width = 832, height = 480, frames = 81;
  int64_t steps = 50;
  bool guided = true;
  wan::Precision precision = wan::Precision::kBF16;
  std::string attention = "dense";  // the --attention spec (density from it)
  double attention_density = 1.0;
  int devices = 0;  // N; 0: every device of the topology
  // Which weight modes to consider ("resident", "sharded").
  std::vector<std::string> weight_modes = {"resident", "sharded"};
  // A step method (--accel, accel/step_method.h) and the sampler it runs with: a method that
  // refuses a mesh rejects it; one whose schedule is fixed (MagCache) scales the denoise time by
  // its planned work fraction; an adaptive one (decided at run time) is priced dense.
  std::string accel = "none", sampler = "unipc";
  // When set, only this mesh is considered (the others are listed as excluded): a prediction for
  // a given mesh, e.g. to compare with a published run.
  std::optional<dist::MeshSpec> only_mesh;
  // Latent geometry (Wan 2.1: 4x temporal, 8x spatial VAE stride; z_dim 16).
  int64_t vae_stride_t = 4, vae_stride_hw = 8, z_dim = 16;
  // The phases around the denoising loop (PhaseCost); a model left unset is not priced.
  std::optional<wan::T5Config> t5;
  std::optional<wan::VaeConfig> vae;
  std::optional<clip::ClipVisionConfig> clip;  // I2V's image encoder
  // Tokens umT5 runs per prompt: the longest prompt (the official code pads every one to 512).
  int64_t text_tokens = 512;
  // The request conditions on an image: CLIP (when set) and the VAE encode of the `frames`-long
  // conditioning video (I2V), or of one frame (TI2V).
  bool image = false;
  wan::Precision vae_precision = wan::Precision::kBF16;
  int64_t vae_tile = 0;  // generate --vae-tile (latent pixels; 0: untiled, on rank 0 alone)
};

// One generation's phases on a mesh, as the runtime runs them (pipeline/generate_run.cpp), in
// seconds of the slowest rank:
//  - text: umT5 on the first rank of each CFG branch's sequence group: the prompt and, guided,
//    the negative prompt (one each with cfg=2), its GEMMs split over tp (the tp all-reduces and
//    the context broadcast are not priced);
//  - image: on world rank 0, CLIP on the image and the VAE encode of the conditioning video;
//  - denoise: steps x the predicted step x the step method's planned work fraction;
//  - decode: the VAE decode on rank 0, or with tiles (vae_tile) dealt tile k to rank k % N, the
//    most loaded rank's tiles plus sending its decoded pixels to the N - 1 others at the
//    device's injection bandwidth.
// The VAE runs at vae_precision (f32: the device's f32 peak), everything else at `precision`.
// Time-shared CPU processes run a phase faster while the other ranks wait
// (DeviceSpec::alone_speedup).
struct PhaseCost {
  double text = 0, image = 0, denoise = 0, decode = 0, total = 0;
  int64_t decode_tiles = 1;  // spatial tiles of the decode
  int decode_ranks = 1;      // ranks they are dealt to
};

struct StepCost {
  double compute = 0;  // seconds of compute per step (GEMMs, attention, memory-bound ops)
  double gemm = 0, attention = 0, memory = 0;
  double pack = 0;  // sharded blocks rebuilt from their gathered bytes, where it takes the cores
  std::map<std::string, double> collectives;  // seconds per "kind@axis" per step
  double communication = 0;  // the collectives run between ops (all of them exposed)
  double overlapped = 0;     // collectives run beside compute (sharded weights' gathers)
  double waits = 0;  // measured waits at collectives for the group's last member (local topology)
  // communication + waits + the part of the overlapped ones compute hides not
  double exposed = 0;
  double step = 0;  // compute + exposed
};

struct PlacementResult {
  Placement placement;
  StepCost cost;
};

struct Candidate {
  dist::MeshSpec mesh;
  std::string weights = "resident";
  double memory_per_device = 0;             // bytes: weights + activations of the denoise phase
  double bound = 0;                         // the cheap lower bound of a step (seconds)
  std::string status;                       // "rejected", "pruned", "ranked"
  std::string reason;                       // why rejected or pruned; the constraint named
  std::vector<PlacementResult> placements;  // ranked: best first
  double rank_order_step = 0;               // the step time with rank r on device r
  PhaseCost phases;                         // ranked: the phases with the best placement
  const PlacementResult* best() const { return placements.empty() ? nullptr : &placements[0]; }
};

struct Plan {
  PlanRequest request;
  Topology topology;
  // --accel: the method's planned share of the dense DiT work (1 when none or decided at run
  // time) and its report as planned (null when none or adaptive).
  double work_fraction = 1;
  nlohmann::json accel_planned;
  int64_t tokens = 0, latent_numel = 0;
  std::vector<Candidate> candidates;  // ranked ones first (best first), then pruned, rejected
  int enumerated = 0, rejected = 0, pruned = 0, compiled = 0, placements = 0;
  const Candidate& winner() const { return candidates.front(); }
  nlohmann::json to_json(bool explain) const;
  std::string to_text(bool explain) const;
  // Open MPI rankfile placing world rank r on its device (hosts named node<k> or localhost; the
  // slot is the device's index in its node, or on shared-memory CPU nodes the range of
  // `cores_per_node` / devices cores the process's threads use).
  std::string rankfile(int cores_per_node = 0) const;
};

// The request's latent and token counts (pipeline/video_request.h latent_geometry with the
// request's strides and the model's patch).
LatentGeometry plan_geometry(const PlanRequest& request);

// The phases of one generation on `mesh` whose step takes `step_seconds`.
PhaseCost predict_phases(const PlanRequest& request, const Topology& topology,
                         const dist::MeshSpec& mesh, double step_seconds, double work_fraction);

// Throws InputError when no mesh runs (naming why each was rejected: the tightest memory need).
Plan make_plan(const PlanRequest& request, const Topology& topology);

// The predicted step time of one mesh and placement (what make_plan ranks by).
StepCost predict_step(const PlanRequest& request, const Topology& topology,
                      const dist::MeshSpec& mesh, bool sharded, const Placement& placement);

// The first `devices` devices of `topology` (switch fabrics: whole nodes, or part of one);
// InputError when the topology cannot be cut there (a torus keeps its shape).
Topology restrict_devices(const Topology& topology, int devices);

}  // namespace vidax::plan
