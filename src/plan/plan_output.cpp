// The planner's outputs (plan/planner.h): the plan as JSON (the plan file plan_file.h reads
// back) and as text, and the MPI rankfile.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "core/byte_size.h"
#include "core/error.h"
#include "plan/planner.h"

namespace vidax::plan {
namespace {

using nlohmann::json;

json cost_json(const StepCost& c) {
  json col = json::object();
  for (const auto& [k, v] : c.collectives) col[k] = v;
  return {{"step_s", c.step},
          {"compute_s", c.compute},
          {"gemm_s", c.gemm},
          {"attention_s", c.attention},
          {"memory_bound_s", c.memory},
          {"pack_s", c.pack},
          {"collectives_s", col},
          {"communication_s", c.communication},
          {"overlapped_s", c.overlapped},
          {"waits_s", c.waits},
          {"exposed_communication_s", c.exposed}};
}

json phases_json(const PhaseCost& p, const PlanRequest& r) {
  return {{"text_s", p.text},
          {"image_s", p.image},
          {"denoise_s", p.denoise},
          {"decode_s", p.decode},
          {"total_s", p.total},
          {"text_tokens", r.text_tokens},
          {"vae_precision", r.vae_precision == wan::Precision::kBF16 ? "bf16" : "fp32"},
          {"decode_tiles", p.decode_tiles},
          {"decode_ranks", p.decode_ranks}};
}

json candidate_json(const Candidate& c, const PlanRequest& r) {
  json j = {{"mesh", c.mesh.str()},
            {"weights", c.weights},
            {"status", c.status},
            {"memory_per_device_bytes", c.memory_per_device},
            {"bound_s", c.bound}};
  if (!c.reason.empty()) j["reason"] = c.reason;
  if (c.best() != nullptr) {
    j["predicted"] = cost_json(c.best()->cost);
    j["predicted"]["phases"] = phases_json(c.phases, r);
    j["placement"] = c.best()->placement.description;
    j["rank_order_step_s"] = c.rank_order_step;
    json places = json::array();
    for (const auto& p : c.placements)
      places.push_back({{"placement", p.placement.description},
                        {"devices", p.placement.device_of_rank},
                        {"step_s", p.cost.step},
                        {"exposed_communication_s", p.cost.exposed}});
    j["placements"] = places;
  }
  return j;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

json Plan::to_json(bool explain) const {
  const Candidate& w = winner();
  const PlacementResult& best = *w.best();
  json ranks = json::array();
  for (size_t r = 0; r < best.placement.device_of_rank.size(); ++r) {
    const int d = best.placement.device_of_rank[r];
    ranks.push_back({{"rank", r}, {"device", topology.device_name(d)}, {"index", d}});
  }
  const wan::DitConfig& c = request.config;
  const int64_t rank_rows = (tokens + w.mesh.sp() - 1) / w.mesh.sp();
  const DeviceSpec used = topology.device.at_rows(rank_rows);
  json j = {{"vidax_plan", 1},
            {"model",
             {{"name", request.model},
              {"dim", c.dim},
              {"num_heads", c.num_heads},
              {"num_layers", c.num_layers},
              {"ffn_dim", c.ffn_dim}}},
            {"request",
             {{"size", str_cat(request.width, "x", request.height)},
              {"width", request.width},
              {"height", request.height},
              {"frames", request.frames},
              {"steps", request.steps},
              {"guided", request.guided},
              {"precision", request.precision == wan::Precision::kBF16 ? "bf16" : "fp32"},
              {"attention", request.attention},
              {"attention_density", request.attention_density},
              {"tokens", tokens}}},
            {"topology",
             {{"name", topology.name},
              {"source", topology.source},
              {"devices", topology.devices()},
              {"device",
               {{"kind", topology.device.kind},
                {"bf16_tflops", topology.device.bf16_flops * 1e-12},
                {"fp32_tflops", topology.device.peak_flops(true) * 1e-12},
                {"memory_bytes", topology.device.memory_bytes},
                {"memory_GBps", topology.device.memory_bandwidth * 1e-9},
                // the shares at the rows the chosen mesh gives a rank
                {"gemm_efficiency", used.gemm_efficiency},
                {"attention_efficiency", used.attention_efficiency},
                {"memory_efficiency", used.memory_efficiency},
                {"conv_efficiency", used.conv_share(false)},
                {"conv_fp32_efficiency", used.conv_share(true)},
                {"efficiency_rows", rank_rows},
                {"pack_GBps", topology.device.pack_bandwidth * 1e-9},
                {"background_shares_cores", topology.device.background_shares_cores}}},
              {"collective_latency_us", topology.collective_latency * 1e6},
              {"notes", topology.notes}}},
            {"mesh",
             {{"spec", w.mesh.str()},
              {"cfg", w.mesh.cfg},
              {"ring", w.mesh.ring},
              {"ulysses", w.mesh.ulysses},
              {"tp", w.mesh.tp}}},
            {"weights", w.weights},
            {"placement", {{"description", best.placement.description}, {"ranks", ranks}}},
            {"predicted", cost_json(best.cost)},
            {"planner",
             {{"enumerated", enumerated},
              {"rejected", rejected},
              {"pruned", pruned},
              {"compiled", compiled},
              {"placements", placements}}}};
  j["predicted"]["memory_per_device_bytes"] = w.memory_per_device;
  j["predicted"]["rank_order_step_s"] = w.rank_order_step;
  j["predicted"]["placement_gain"] = w.rank_order_step / best.cost.step;
  // A fixed step schedule (--accel) does its share of the dense steps' work.
  j["predicted"]["denoise_s"] = w.phases.denoise;
  // The whole generation: the phases around the loop as the runtime runs them on this mesh.
  j["predicted"]["phases"] = phases_json(w.phases, request);
  j["accel"] = {{"spec", request.accel},
                {"sampler", request.sampler},
                {"work_fraction", work_fraction},
                {"priced", request.accel == "none"   ? "dense"
                           : accel_planned.is_null() ? "dense: decided at run time"
                                                     : "planned schedule"},
                {"planned", accel_planned}};
  if (explain) {
    json all = json::array();
    for (const Candidate& cand : candidates) all.push_back(candidate_json(cand, request));
    j["candidates"] = all;
  }
  return j;
}

std::string Plan::to_text(bool explain) const {
  const Candidate& w = winner();
  const StepCost& c = w.best()->cost;
  std::ostringstream s;
  s << "plan for " << request.model << ", " << request.width << "x" << request.height << " x "
    << request.frames << " frames (" << tokens << " tokens) on " << topology.name << " ("
    << topology.devices() << " x " << topology.device.kind << ")\n";
  s << "mesh: " << w.mesh.str() << ", weights " << w.weights << ", "
    << format_bytes(w.memory_per_device) << " per device\n";
  s << "placement: " << w.best()->placement.description << "\n";
  s << "predicted step: " << fmt("%.4g", c.step) << " s = compute " << fmt("%.4g", c.compute)
    << " s (gemm " << fmt("%.3g", c.gemm) << ", attention " << fmt("%.3g", c.attention)
    << ", memory-bound " << fmt("%.3g", c.memory) << ") + exposed communication "
    << fmt("%.4g", c.exposed) << " s\n";
  for (const auto& [k, v] : c.collectives) s << "  " << k << ": " << fmt("%.4g", v) << " s\n";
  if (c.waits > 0) s << "  waits at collectives (measured): " << fmt("%.4g", c.waits) << " s\n";
  s << "denoise: " << request.steps << " steps, " << fmt("%.4g", w.phases.denoise) << " s";
  if (request.accel != "none")
    s << " (--accel " << request.accel << ": "
      << (accel_planned.is_null() ? std::string("decided at run time, priced dense")
                                  : str_cat("work fraction ", fmt("%.3f", work_fraction)))
      << ")";
  s << "\n";
  const PhaseCost& ph = w.phases;
  s << "generation: " << fmt("%.4g", ph.total) << " s = text " << fmt("%.3g", ph.text) << " s ("
    << request.text_tokens << " tokens)";
  if (request.image) s << " + image " << fmt("%.3g", ph.image) << " s";
  s << " + denoise " << fmt("%.4g", ph.denoise) << " s + decode " << fmt("%.3g", ph.decode)
    << " s (" << (request.vae_precision == wan::Precision::kBF16 ? "bf16" : "fp32") << ", "
    << (ph.decode_ranks > 1   ? str_cat(ph.decode_tiles, " tiles over ", ph.decode_ranks, " ranks")
        : ph.decode_tiles > 1 ? str_cat(ph.decode_tiles, " tiles on rank 0")
                              : std::string("rank 0"))
    << ")\n";
  s << "rank-order placement: " << fmt("%.4g", w.rank_order_step) << " s ("
    << fmt("%.3f", w.rank_order_step / c.step) << "x the chosen one)\n";
  s << "searched: " << enumerated << " meshes, " << rejected << " rejected, " << pruned
    << " pruned, " << compiled << " compiled, " << placements << " placements simulated\n";
  if (explain) {
    s << "\ncandidates (best first):\n";
    for (const Candidate& cand : candidates) {
      s << "  " << cand.mesh.str() << " " << cand.weights << ": " << cand.status;
      if (cand.best() != nullptr)
        s << ", step " << fmt("%.4g", cand.best()->cost.step) << " s (compute "
          << fmt("%.4g", cand.best()->cost.compute) << ", exposed comm "
          << fmt("%.4g", cand.best()->cost.exposed) << "), rank order "
          << fmt("%.4g", cand.rank_order_step) << " s, best placement "
          << cand.best()->placement.description << ", " << cand.placements.size() << " placements";
      else if (cand.status == "pruned")
        s << " (bound " << fmt("%.4g", cand.bound) << " s): " << cand.reason;
      else
        s << ": " << cand.reason;
      s << "\n";
    }
  }
  return s.str();
}

std::string Plan::rankfile(int cores_per_node) const {
  std::ostringstream s;
  const PlacementResult& best = *winner().best();
  for (size_t r = 0; r < best.placement.device_of_rank.size(); ++r) {
    const int d = best.placement.device_of_rank[r];
    if (topology.fabric == FabricKind::kSwitch) {
      const std::string host =
          topology.nodes == 1 ? std::string("localhost") : str_cat("node", topology.node_of(d));
      const int local = d % topology.devices_per_node;
      if (topology.intra == "shm" && cores_per_node > 0) {
        // A CPU process owns its share of the node's cores (its OpenMP threads), not one core.
        const int share = std::max(1, cores_per_node / topology.devices_per_node);
        const int first = (local * share) % cores_per_node;
        s << "rank " << r << "=" << host << " slot=" << first;
        if (share > 1) s << "-" << first + share - 1;
        s << "\n";
      } else {
        s << "rank " << r << "=" << host << " slot=" << local << "\n";
      }
    } else {
      // A TPU slice has no MPI ranks; the file still says which chip each rank takes.
      s << "# rank " << r << " -> chip " << topology.device_name(d) << "\n";
    }
  }
  return s.str();
}

}  // namespace vidax::plan
