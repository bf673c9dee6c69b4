#include "plan/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "accel/step_method.h"
#include "core/byte_size.h"
#include "core/error.h"
#include "models/wan/dit_schedule.h"
#include "models/wan/dit_tensors.h"
#include "plan/compute_cost.h"
#include "plan/placement.h"

namespace vidax::plan {
namespace {

using dist::MeshSpec;
using dist::OpClass;

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

wan::DitScheduleRequest schedule_request(const PlanRequest& r, int64_t tokens, int64_t latent,
                                         bool sharded) {
  wan::DitScheduleRequest s;
  s.tokens = tokens;
  s.latent_numel = latent;
  s.precision = r.precision;
  s.guided = r.guided;
  s.attention_density = r.attention_density;
  s.sparse_policy = r.attention != "dense";
  s.sharded_weights = sharded;
  s.checkpoint_item_bytes = 2;  // published checkpoints are bf16
  return s;
}

// Why the runtime would refuse `m` for this request; empty when it runs.
std::string refusal(const PlanRequest& r, const MeshSpec& m, bool sharded) {
  const wan::DitConfig& c = r.config;
  if (m.cfg == 2 && !r.guided) return "cfg=2 needs classifier-free guidance";
  if (c.num_heads % (m.ulysses * m.tp) != 0)
    return str_cat("ulysses x tp = ", m.ulysses * m.tp, " does not divide the ", c.num_heads,
                   " heads");
  if (m.tp > 1)
    for (const auto& d : wan::dit_tensor_decls(c)) {
      if (d.shard == ShardAxis::kNone || d.name.rfind("blocks.0.", 0) != 0) continue;
      const int64_t n = d.shape[d.shard == ShardAxis::kOutput ? 0 : 1];
      if (n % m.tp != 0) return str_cat("tp=", m.tp, " does not divide ", d.name, " (", n, ")");
    }
  if (m.ring > 1 && r.attention != "dense") return "ring attention is dense only";
  if (sharded && m.sp() < 2) return "--weights sharded needs ring x ulysses >= 2";
  return {};
}

double weight_bytes(const PlanRequest& r, const MeshSpec& m, bool sharded) {
  const wan::DitConfig& c = r.config;
  const double item = r.precision == wan::Precision::kBF16 ? 2.0 : 4.0;
  double stem = 0;
  for (const auto& d : wan::dit_tensor_decls(c))
    if (d.name.rfind("blocks.", 0) != 0) stem += static_cast<double>(d.shape.numel());
  const double block = wan::WanDit::block_weight_bytes(c, r.precision, m.tp);
  const double layers = static_cast<double>(c.num_layers);
  if (!sharded) return stem * item + layers * block;
  // Each sequence rank keeps 1/sp of its tp slice of every block's checkpoint bytes plus a
  // window of two packed blocks (models/wan/dit_sharded.h).
  return stem * item + layers * wan::dit_block_checkpoint_bytes(c, 2, m.tp) / m.sp() + 2 * block;
}

double memory_need(const PlanRequest& r, const MeshSpec& m, bool sharded, int64_t tokens) {
  const int64_t rows = (tokens + m.sp() - 1) / m.sp();
  // The exchanged q|k|v and attention output beside the per-row activations.
  const double exchange =
      4.0 * static_cast<double>(rows) * 4.0 * static_cast<double>(r.config.dim) / m.tp * 4.0;
  return weight_bytes(r, m, sharded) + wan::WanDit::activation_bytes(r.config, rows) + exchange;
}

std::string key_of(const dist::ScheduledOp& op) {
  return std::string(dist::collective_name(op.kind)) + "@" + dist::mesh_axis_name(op.axis);
}

accel::RunInfo run_info(const PlanRequest& r, const MeshSpec& m, int64_t tokens) {
  accel::RunInfo run;
  run.dit = r.config;
  run.steps = static_cast<int>(r.steps);
  run.branches = r.guided ? 2 : 1;
  run.width = r.width;
  run.height = r.height;
  run.tokens = tokens;
  run.sampler = r.sampler;
  run.sequence_parallel = m.sp();
  run.tensor_parallel = m.tp;
  run.cfg_parallel = m.cfg;
  const LatentGeometry g = plan_geometry(r);
  run.latent = {g.frames, g.height, g.width};
  return run;
}

// Why the step method refuses this mesh (its own check); empty when it runs.
std::string accel_refusal(const PlanRequest& r, const MeshSpec& m, int64_t tokens) {
  if (r.accel.empty() || r.accel == "none") return {};
  try {
    (void)accel::make_step_method(r.accel, run_info(r, m, tokens));
  } catch (const InputError& e) {
    return e.what();
  }
  return {};
}

}  // namespace

LatentGeometry plan_geometry(const PlanRequest& r) {
  return latent_geometry({r.width, r.height, r.frames}, r.z_dim, r.vae_stride_t, r.vae_stride_hw,
                         r.config.patch[0], r.config.patch[1]);
}

Topology restrict_devices(const Topology& t, int devices) {
  if (devices <= 0 || devices == t.devices()) return t;
  if (devices > t.devices())
    throw_input_error("--devices: ", devices, " is more than the ", t.devices(), " devices of ",
                      t.name);
  if (t.fabric == FabricKind::kTorus)
    throw_input_error("--devices: a torus slice is used whole (", t.name, " has ", t.devices(),
                      " chips); pick the preset of the sub-slice's shape");
  Topology r = t;
  if (devices % t.devices_per_node == 0) {
    r.nodes = devices / t.devices_per_node;
  } else if (devices < t.devices_per_node) {
    r.nodes = 1;
    r.devices_per_node = devices;
    if (r.intra == "pcie") {
      if (devices > t.pcie_switch_devices && devices % t.pcie_switch_devices != 0)
        throw_input_error("--devices: ", devices, " GPUs do not fill whole PCIe switches of ",
                          t.pcie_switch_devices);
      r.pcie_switch_devices = std::min(devices, t.pcie_switch_devices);
    }
  } else {
    throw_input_error("--devices: ", devices, " is neither part of one node nor whole nodes of ",
                      t.devices_per_node);
  }
  r.name = str_cat(t.name, "/", devices);
  r.build();
  return r;
}

StepCost predict_step(const PlanRequest& r, const Topology& topo, const MeshSpec& mesh,
                      bool sharded, const Placement& placement) {
  const wan::DitConfig& c = r.config;
  const LatentGeometry g = plan_geometry(r);
  const dist::Schedule s = wan::dit_step_schedule(
      c, schedule_request(r, g.tokens, g.channels * g.frames * g.height * g.width, sharded), mesh);
  LinkModel links(topo, placement, mesh);
  // The shares of peak for the rows this mesh gives a rank (measured topologies vary with them).
  const DeviceSpec device = topo.device.at_rows((g.tokens + mesh.sp() - 1) / mesh.sp());
  const bool fp32 = r.precision == wan::Precision::kFP32;
  StepCost cost;
  // The measured waits at collectives (Topology::collective_waits), each after the compute since
  // the rank's previous collective: walked once per segment and once more for its repeats (which
  // start after the segment's own tail).
  double since = 0;
  const auto walk_waits = [&](const dist::ScheduleSegment& seg) {
    double waits = 0;
    for (const auto& op : seg.ops) {
      if (op.overlapped && !topo.device.background_shares_cores) continue;  // beside the compute
      if (!op.collective()) {
        since += op_seconds(device, op, fp32) * static_cast<double>(op.calls);
      } else if (!op.overlapped && dist::axis_size(mesh, op.axis) > 1) {
        waits += topo.wait_at_collective(dist::axis_size(mesh, op.axis), since);
        since = 0;
      }
    }
    return waits;
  };
  for (const auto& seg : s.segments) {
    if (!topo.collective_waits.empty()) {
      cost.waits += walk_waits(seg);
      if (seg.repeat > 1) cost.waits += walk_waits(seg) * static_cast<double>(seg.repeat - 1);
    }
    double seg_compute = 0, seg_overlapped = 0;
    for (const auto& op : seg.ops) {
      if (op.collective()) {
        const double t = links.time(op).seconds;
        cost.collectives[key_of(op)] += t * static_cast<double>(seg.repeat);
        // A background collective hides behind compute unless it takes the compute's cores
        // (a CPU process: the loader thread's copies run on the same cores).
        if (op.overlapped && !topo.device.background_shares_cores) {
          seg_overlapped += t;
        } else {
          cost.communication += t * static_cast<double>(seg.repeat);
        }
        continue;
      }
      const double t = op_seconds(device, op, fp32) * static_cast<double>(op.calls);
      if (op.overlapped && !topo.device.background_shares_cores) {
        seg_overlapped += t;  // background work on its own resources
        continue;
      }
      seg_compute += t;
      (op.cls == OpClass::kGemm || op.cls == OpClass::kConv ? cost.gemm
       : op.cls == OpClass::kAttention                      ? cost.attention
       : op.cls == OpClass::kPack                           ? cost.pack
                                  : cost.memory) += t * static_cast<double>(seg.repeat);
    }
    cost.compute += seg_compute * static_cast<double>(seg.repeat);
    cost.overlapped += seg_overlapped * static_cast<double>(seg.repeat);
    // A prefetch hides behind the segment's compute (the block before the one it loads).
    cost.exposed += std::max(0.0, seg_overlapped - seg_compute) * static_cast<double>(seg.repeat);
  }
  cost.exposed += cost.communication + cost.waits;
  cost.step = cost.compute + cost.exposed;
  return cost;
}

Plan make_plan(const PlanRequest& request, const Topology& topology_in) {
  Plan plan;
  plan.request = request;
  plan.topology = restrict_devices(topology_in, request.devices);
  const Topology& topo = plan.topology;
  const int n = topo.devices();
  plan.request.devices = n;
  if (request.only_mesh && request.only_mesh->size() != n)
    throw_input_error("--mesh ", request.only_mesh->str(), " has ", request.only_mesh->size(),
                      " processes; ", topo.name, " gives ", n, " devices (use --devices ",
                      request.only_mesh->size(), ")");
  const wan::DitConfig& c = request.config;
  if (request.frames < 1 || (request.frames - 1) % request.vae_stride_t != 0)
    throw_input_error("--frames: ", request.frames, " is not 1 + ", request.vae_stride_t, "k");
  const int64_t multiple = request.vae_stride_hw * c.patch[1];
  if (request.width % multiple != 0 || request.height % multiple != 0 || request.width <= 0 ||
      request.height <= 0)
    throw_input_error("--size: ", request.width, "x", request.height,
                      " is not a positive multiple of ", multiple);
  const LatentGeometry g = plan_geometry(request);
  plan.tokens = g.tokens;
  plan.latent_numel = g.channels * g.frames * g.height * g.width;
  if (!request.accel.empty() && request.accel != "none") {
    // The spec is checked once on one process (a bad spec is the same error on every mesh).
    const auto method = accel::make_step_method(request.accel, run_info(request, {}, plan.tokens));
    if (const auto planned = method->planned_report()) {
      plan.work_fraction = planned->work_fraction;
      plan.accel_planned = planned->to_json();
    }
  }

  // 1. Enumerate.
  std::vector<Candidate> all;
  for (int cfg : {1, 2})
    for (int tp : divisors(n))
      for (int u : divisors(n))
        for (int ring : divisors(n)) {
          if (cfg * tp * u * ring != n) continue;
          for (const std::string& weights : request.weight_modes) {
            Candidate cand;
            cand.mesh = {cfg, ring, u, tp};
            cand.weights = weights;
            const bool sharded = weights == "sharded";
            ++plan.enumerated;
            cand.reason = refusal(request, cand.mesh, sharded);
            if (cand.reason.empty()) cand.reason = accel_refusal(request, cand.mesh, plan.tokens);
            if (request.only_mesh && !(*request.only_mesh == cand.mesh))
              cand.reason =
                  str_cat("not the mesh asked for (--mesh ", request.only_mesh->str(), ")");
            if (cand.reason.empty()) {
              cand.memory_per_device = memory_need(request, cand.mesh, sharded, plan.tokens);
              if (cand.memory_per_device > topo.device.memory_bytes)
                cand.reason =
                    str_cat("needs ", format_bytes(cand.memory_per_device), " per device, ",
                            topo.device.kind, " has ", format_bytes(topo.device.memory_bytes));
            }
            if (!cand.reason.empty()) {
              cand.status = "rejected";
              ++plan.rejected;
            }
            all.push_back(std::move(cand));
          }
        }
  // 2. A lower bound of each mesh's step: its FLOPs at peak, or the bytes a rank sends between
  // ops at its injection rate (the predicted step is compute + exposed communication, each at
  // most that fast, so no mesh whose bound exceeds a predicted step can win).
  const double inject = topo.injection_bandwidth();
  for (Candidate& cand : all) {
    if (cand.status == "rejected") continue;
    const dist::Schedule s = wan::dit_step_schedule(
        c, schedule_request(request, plan.tokens, plan.latent_numel, cand.weights == "sharded"),
        cand.mesh);
    const double sent = s.exposed_bytes_sent(cand.mesh);
    cand.bound = std::max(
        s.total_flops() / topo.device.peak_flops(request.precision == wan::Precision::kFP32),
        sent / inject);
  }
  std::vector<Candidate*> viable;
  for (Candidate& cand : all)
    if (cand.status != "rejected") viable.push_back(&cand);
  if (viable.empty()) {
    if (request.only_mesh)
      for (const Candidate& cand : all)
        if (cand.mesh == *request.only_mesh)
          throw_input_error("--mesh ", cand.mesh.str(), " on ", topo.name, ": ", cand.reason);
    const Candidate* tightest = nullptr;
    for (const Candidate& cand : all)
      if (cand.memory_per_device > 0 &&
          (tightest == nullptr || cand.memory_per_device < tightest->memory_per_device))
        tightest = &cand;
    if (tightest != nullptr)
      throw_input_error("no mesh of ", n, " devices fits ", topo.name, ": the smallest need is ",
                        tightest->mesh.str(), " (", tightest->weights, " weights) with ",
                        format_bytes(tightest->memory_per_device), " per device, ",
                        topo.device.kind, " has ", format_bytes(topo.device.memory_bytes));
    throw_input_error("no mesh of ", n, " devices runs this model: ", all.front().reason);
  }
  // Compiled in the order of their bounds; pruned once the bound exceeds the best step found.
  std::sort(viable.begin(), viable.end(),
            [](const Candidate* a, const Candidate* b) { return a->bound < b->bound; });
  double best_step = 1e300;
  for (Candidate* next : viable) {
    Candidate& cand = *next;
    if (cand.bound > best_step) {
      cand.status = "pruned";
      char text[96];
      std::snprintf(text, sizeof text,
                    "its lower bound %.4g s exceeds the best predicted step %.4g s", cand.bound,
                    best_step);
      cand.reason = text;
      ++plan.pruned;
      continue;
    }
    // 3 and 4. Compile (the schedule) and place.
    cand.status = "ranked";
    ++plan.compiled;
    for (Placement& p : enumerate_placements(topo, cand.mesh)) {
      PlacementResult pr;
      pr.cost = predict_step(request, topo, cand.mesh, cand.weights == "sharded", p);
      pr.placement = std::move(p);
      cand.placements.push_back(std::move(pr));
      ++plan.placements;
    }
    cand.rank_order_step = cand.placements.front().cost.step;  // the rank-order placement
    std::stable_sort(cand.placements.begin(), cand.placements.end(),
                     [](const PlacementResult& a, const PlacementResult& b) {
                       return a.cost.step < b.cost.step;
                     });
    best_step = std::min(best_step, cand.placements.front().cost.step);
    cand.phases = predict_phases(request, topo, cand.mesh, cand.placements.front().cost.step,
                                 plan.work_fraction);
  }
  auto order = [](const Candidate& cand) {
    return cand.status == "ranked" ? 0 : cand.status == "pruned" ? 1 : 2;
  };
  std::stable_sort(all.begin(), all.end(), [&](const Candidate& a, const Candidate& b) {
    if (order(a) != order(b)) return order(a) < order(b);
    if (order(a) == 0) return a.best()->cost.step < b.best()->cost.step;
    return a.bound < b.bound;
  });
  plan.candidates = std::move(all);
  return plan;
}

}  // namespace vidax::plan
