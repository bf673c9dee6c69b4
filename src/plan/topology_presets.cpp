// Topology presets, written in the file format (docs/planner.md lists their sources). Device
// figures are the vendors' published peaks; link figures per direction; the efficiencies are
// assumptions (the defaults) unless noted.
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "plan/topology.h"

namespace vidax::plan {
namespace {

using nlohmann::json;

json device(const char* kind, double tflops, double gib, double gbps) {
  return {{"kind", kind}, {"bf16_tflops", tflops}, {"memory_gib", gib}, {"memory_GBps", gbps}};
}

// A TPU slice: `dims` chips, `link` GB/s per ICI link and direction. `wrap` per dimension.
json tpu(const std::string& name, json dev, std::vector<int> dims, std::vector<bool> wrap,
         double link, const std::string& notes) {
  return {{"name", name},
          {"device", std::move(dev)},
          {"fabric",
           {{"kind", "torus"},
            {"dims", dims},
            {"wrap", wrap},
            {"link_GBps", link},
            {"hop_latency_us", 1.0}}},
          {"collective_latency_us", 5.0},
          {"notes", notes}};
}

json gpus(const std::string& name, json dev, int nodes, int per_node, json intra, double nic,
          const std::string& notes) {
  json f = {{"kind", "switch"},
            {"nodes", nodes},
            {"devices_per_node", per_node},
            {"intra", std::move(intra)}};
  if (nodes > 1) f["inter"] = {{"GBps", nic}, {"latency_us", 5.0}};
  return {{"name", name},
          {"device", std::move(dev)},
          {"fabric", f},
          {"collective_latency_us", 15.0},
          {"notes", notes}};
}

std::vector<bool> wrap_if_multiple_of_4(const std::vector<int>& dims) {
  bool all = true;
  for (int d : dims) all = all && d % 4 == 0;
  return std::vector<bool>(dims.size(), all);
}

std::string shape_name(const std::vector<int>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) s += 'x';
    s += std::to_string(dims[i]);
  }
  return s;
}

const std::map<std::string, std::function<json()>>& presets() {
  static const std::map<std::string, std::function<json()>> p = [] {
    std::map<std::string, std::function<json()>> m;
    // TPU v4: 275 TFLOP/s, 32 GiB, 1200 GB/s HBM; 3D; a torus only where every dimension is a
    // multiple of 4 (Cloud TPU docs). 6 ICI ports; 50 GB/s per link and direction assumed.
    for (const std::vector<int>& d :
         {std::vector<int>{2, 2, 1}, {2, 2, 2}, {2, 2, 4}, {2, 4, 4}, {4, 4, 4}, {4, 4, 8}}) {
      const std::string n = "tpu-v4-" + shape_name(d);
      m[n] = [=] {
        return tpu(n, device("tpu-v4", 275, 32, 1200), d, wrap_if_multiple_of_4(d), 50,
                   "Cloud TPU v4 figures; ICI per link assumed 50 GB/s per direction");
      };
    }
    // TPU v5e: 197 TFLOP/s, 16 GB, 819 GB/s; 400 GB/s ICI per chip over 4 ports -> 50 GB/s per
    // link and direction; 2D. Wrap-around below the full 16x16 pod is not documented: off.
    for (const std::vector<int>& d :
         {std::vector<int>{2, 2}, {2, 4}, {4, 4}, {4, 8}, {8, 8}, {8, 16}, {16, 16}}) {
      const std::string n = "tpu-v5e-" + shape_name(d);
      const bool pod = d[0] == 16 && d[1] == 16;
      m[n] = [=] {
        return tpu(n, device("tpu-v5e", 197, 16.0 * 1e9 / 1073741824.0, 819), d, {pod, pod}, 50,
                   "Cloud TPU v5e figures; wrap-around assumed only on the full 16x16 pod");
      };
    }
    // TPU v5p: 459 TFLOP/s, 95 GiB, 2765 GB/s; 1200 GB/s ICI over 6 ports -> 100 GB/s per link
    // and direction; 3D, a torus from multiples of 4.
    for (const std::vector<int>& d :
         {std::vector<int>{2, 2, 1}, {2, 2, 2}, {2, 2, 4}, {2, 4, 4}, {4, 4, 4}}) {
      const std::string n = "tpu-v5p-" + shape_name(d);
      m[n] = [=] {
        return tpu(n, device("tpu-v5p", 459, 95, 2765), d, wrap_if_multiple_of_4(d), 100,
                   "Cloud TPU v5p figures");
      };
    }
    // TPU v6e: 918 TFLOP/s, 32 GB, 1638 GB/s; 800 GB/s ICI over 4 ports -> 100 GB/s per link and
    // direction; 2D, wrap assumed only on the full pod.
    for (const std::vector<int>& d :
         {std::vector<int>{2, 2}, {2, 4}, {4, 4}, {4, 8}, {8, 8}, {8, 16}, {16, 16}}) {
      const std::string n = "tpu-v6e-" + shape_name(d);
      const bool pod = d[0] == 16 && d[1] == 16;
      m[n] = [=] {
        return tpu(n, device("tpu-v6e", 918, 32.0 * 1e9 / 1073741824.0, 1638), d, {pod, pod}, 100,
                   "Cloud TPU v6e figures; wrap-around assumed only on the full 16x16 pod");
      };
    }
    const json nvswitch450 = {{"kind", "nvswitch"}, {"GBps", 450}, {"latency_us", 2.0}};
    // H100 SXM: 989 TFLOP/s dense bf16, 80 GB, 3350 GB/s; NVLink 4 900 GB/s per GPU (450 per
    // direction) through NVSwitch; 8 x 400 Gb/s InfiniBand NICs per node (50 GB/s per GPU).
    m["h100-nvswitch-x8"] = [=] {
      return gpus("h100-nvswitch-x8", device("h100", 989, 80.0 * 1e9 / 1073741824.0, 3350), 1, 8,
                  nvswitch450, 0, "NVIDIA H100 SXM (DGX H100)");
    };
    m["h100-nvswitch-x8-ib-x2"] = [=] {
      return gpus("h100-nvswitch-x8-ib-x2", device("h100", 989, 80.0 * 1e9 / 1073741824.0, 3350), 2,
                  8, nvswitch450, 50, "two DGX H100 nodes over 400 Gb/s InfiniBand per GPU");
    };
    // H20: 148 TFLOP/s bf16, 96 GB, 4000 GB/s, NVLink 900 GB/s per GPU.
    m["h20-nvswitch-x8"] = [=] {
      return gpus("h20-nvswitch-x8", device("h20", 148, 96.0 * 1e9 / 1073741824.0, 4000), 1, 8,
                  nvswitch450, 0, "NVIDIA H20 HGX");
    };
    // A100 SXM 80 GB: 312 TFLOP/s, 2039 GB/s, NVLink 3 600 GB/s per GPU (300 per direction);
    // A800: NVLink cut to 400 GB/s (200 per direction).
    m["a100-nvswitch-x8"] = [=] {
      return gpus("a100-nvswitch-x8", device("a100", 312, 80.0 * 1e9 / 1073741824.0, 2039), 1, 8,
                  {{"kind", "nvswitch"}, {"GBps", 300}, {"latency_us", 2.0}}, 0,
                  "NVIDIA A100 SXM 80 GB HGX");
    };
    m["a800-nvswitch-x8"] = [=] {
      return gpus("a800-nvswitch-x8", device("a800", 312, 80.0 * 1e9 / 1073741824.0, 2039), 1, 8,
                  {{"kind", "nvswitch"}, {"GBps", 200}, {"latency_us", 2.0}}, 0,
                  "NVIDIA A800 SXM 80 GB HGX (NVLink 400 GB/s)");
    };
    // L40: 181 TFLOP/s dense bf16, 48 GB, 864 GB/s; no NVLink: PCIe 4.0 x16 (about 25 GB/s
    // per direction), two PCIe switches of four GPUs joined through the host (assumed 20 GB/s).
    m["l40-pcie-x8"] = [=] {
      return gpus("l40-pcie-x8", device("l40", 181, 48.0 * 1e9 / 1073741824.0, 864), 1, 8,
                  {{"kind", "pcie"},
                   {"GBps", 25},
                   {"latency_us", 5.0},
                   {"devices_per_switch", 4},
                   {"host_GBps", 20}},
                  0, "NVIDIA L40 on PCIe 4.0; switch layout assumed (two switches of four)");
    };
    return m;
  }();
  return p;
}

}  // namespace

std::vector<std::string> topology_preset_names() {
  std::vector<std::string> n;
  for (const auto& [k, v] : presets()) n.push_back(k);
  n.push_back("local");
  return n;
}

std::optional<Topology> topology_preset(const std::string& name) {
  const auto it = presets().find(name);
  if (it == presets().end()) return std::nullopt;
  Topology t = parse_topology(it->second().dump(), "preset " + name);
  t.source = "preset";
  return t;
}

}  // namespace vidax::plan
