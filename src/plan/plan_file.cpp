#include "plan/plan_file.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace vidax::plan {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& source, const std::string& field,
                      const std::string& expected) {
  throw_input_error(source, ": ", field, ": expected ", expected);
}

int64_t positive(const json& j, const std::string& source, const std::string& field) {
  const json* v = &j;
  std::string path;
  std::stringstream ss(field);
  for (std::string part; std::getline(ss, part, '.');) {
    if (!v->is_object() || !v->contains(part)) bad(source, field, "a positive integer (missing)");
    v = &v->at(part);
  }
  if (!v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() > (1 << 30))
    bad(source, field, "a positive integer, got " + v->dump());
  return v->get<int64_t>();
}

}  // namespace

PlanFile parse_plan_file(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw_input_error(source, ": not valid JSON (", e.what(), ")");
  }
  if (!j.is_object() || !j.contains("vidax_plan") || j.at("vidax_plan") != 1)
    bad(source, "vidax_plan", "1 (a file written by vidax plan)");
  PlanFile p;
  p.mesh.cfg = static_cast<int>(positive(j, source, "mesh.cfg"));
  p.mesh.ring = static_cast<int>(positive(j, source, "mesh.ring"));
  p.mesh.ulysses = static_cast<int>(positive(j, source, "mesh.ulysses"));
  p.mesh.tp = static_cast<int>(positive(j, source, "mesh.tp"));
  if (p.mesh.cfg > 2) bad(source, "mesh.cfg", "1 or 2");
  for (const char* axis : {"ring", "ulysses", "tp"})
    if (j.at("mesh").at(axis).get<int64_t>() > 65536)
      bad(source, std::string("mesh.") + axis, "at most 65536");
  if (static_cast<int64_t>(p.mesh.cfg) * p.mesh.ring * p.mesh.ulysses * p.mesh.tp > 65536)
    bad(source, "mesh", "at most 65536 processes in all");
  if (!j.contains("weights") || !j.at("weights").is_string() ||
      (j.at("weights") != "resident" && j.at("weights") != "sharded"))
    bad(source, "weights", "\"resident\" or \"sharded\"");
  p.weights = j.at("weights").get<std::string>();
  p.devices = static_cast<int>(positive(j, source, "topology.devices"));
  if (p.devices != p.mesh.size())
    bad(source, "topology.devices",
        str_cat("the mesh's ", p.mesh.size(), " processes, got ", p.devices));
  if (j.at("topology").contains("name")) {
    if (!j.at("topology").at("name").is_string()) bad(source, "topology.name", "a string");
    p.topology = j.at("topology").at("name").get<std::string>();
  }
  p.dim = positive(j, source, "model.dim");
  p.num_heads = positive(j, source, "model.num_heads");
  p.num_layers = positive(j, source, "model.num_layers");
  p.width = positive(j, source, "request.width");
  p.height = positive(j, source, "request.height");
  p.frames = positive(j, source, "request.frames");
  const json* ranks = nullptr;
  if (j.contains("placement") && j.at("placement").is_object() &&
      j.at("placement").contains("ranks"))
    ranks = &j.at("placement").at("ranks");
  if (ranks == nullptr || !ranks->is_array() || static_cast<int>(ranks->size()) != p.devices)
    bad(source, "placement.ranks", str_cat("one entry per rank (", p.devices, ")"));
  for (size_t r = 0; r < ranks->size(); ++r) {
    const json& e = (*ranks)[r];
    if (!e.is_object() || !e.contains("rank") || e.at("rank") != r || !e.contains("device") ||
        !e.at("device").is_string())
      bad(source, str_cat("placement.ranks[", r, "]"),
          str_cat("{\"rank\": ", r, ", \"device\": NAME}"));
    p.device_of_rank.push_back(e.at("device").get<std::string>());
  }
  if (j.contains("predicted") && j.at("predicted").contains("step_s") &&
      j.at("predicted").at("step_s").is_number())
    p.predicted_step_seconds = j.at("predicted").at("step_s").get<double>();
  p.json = std::move(j);
  return p;
}

PlanFile read_plan_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_input_error("--plan: cannot read ", path);
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > (64u << 20)) throw_input_error(path, ": larger than 64 MiB");
  return parse_plan_file(text.str(), path);
}

}  // namespace vidax::plan
