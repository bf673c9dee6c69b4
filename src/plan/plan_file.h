// The plan file `vidax plan -o plan.json` writes and `vidax generate --plan plan.json` executes:
// the mesh, the weight mode, the device of every rank, the request and model it was made for and
// the prediction (format: docs/planner.md). Reading checks every field (InputError naming it).
// Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dist/mesh.h"

namespace vidax::plan {

struct PlanFile {
  dist::MeshSpec mesh;
  std::string weights = "resident";  // "resident" | "sharded"
  int devices = 0;
  std::string topology;
  std::vector<std::string> device_of_rank;  // device names, rank order
  // What it was planned for: checked by generate against its own request.
  int64_t dim = 0, num_heads = 0, num_layers = 0;
  int64_t width = 0, height = 0, frames = 0;
  double predicted_step_seconds = 0;
  nlohmann::json json;  // the whole file, recorded in the sidecar
};

PlanFile parse_plan_file(const std::string& json_text, const std::string& source);
PlanFile read_plan_file(const std::string& path);

}  // namespace vidax::plan
