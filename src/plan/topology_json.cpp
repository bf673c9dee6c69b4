// The topology file format (docs/planner.md) and the presets, which are written in the same
// format and read by the same parser.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "plan/topology.h"

namespace vidax::plan {
namespace {

using nlohmann::json;

class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& expected) const {
    throw_input_error(source_, ": ", field, ": expected ", expected);
  }
  const json& object(const json& j, const std::string& field,
                     const std::set<std::string>& known) const {
    if (!j.is_object()) fail(field, "an object");
    for (const auto& [k, v] : j.items())
      if (!known.count(k)) {
        std::string list;
        for (const auto& n : known) list += (list.empty() ? "" : ", ") + n;
        fail(join(field, k), "one of the fields " + list + " (unknown field)");
      }
    return j;
  }
  double number(const json& j, const std::string& parent, const std::string& key, bool required,
                double fallback, double min_exclusive = 0) const {
    if (!j.contains(key)) {
      if (required) fail(join(parent, key), "a number (missing)");
      return fallback;
    }
    const json& v = j.at(key);
    if (!v.is_number() || !(v.get<double>() > min_exclusive))
      fail(join(parent, key), (min_exclusive < 0 ? std::string("a number >= 0")
                                                 : "a number above " + fmt(min_exclusive)) +
                                  ", got " + v.dump());
    return v.get<double>();
  }
  int integer(const json& j, const std::string& parent, const std::string& key, bool required,
              int fallback) const {
    if (!j.contains(key)) {
      if (required) fail(join(parent, key), "a positive integer (missing)");
      return fallback;
    }
    const json& v = j.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 65536)
      fail(join(parent, key), "a positive integer up to 65536, got " + v.dump());
    return v.get<int>();
  }
  std::string text(const json& j, const std::string& parent, const std::string& key,
                   bool required) const {
    if (!j.contains(key)) {
      if (required) fail(join(parent, key), "a string (missing)");
      return {};
    }
    if (!j.at(key).is_string()) fail(join(parent, key), "a string, got " + j.at(key).dump());
    return j.at(key).get<std::string>();
  }
  static std::string join(const std::string& parent, const std::string& key) {
    return parent.empty() ? key : parent + "." + key;
  }

 private:
  static std::string fmt(double v) {
    std::ostringstream s;
    s << v;
    return s.str();
  }
  std::string source_;
};

// Moves `from` to `to` inside object `o` (the other spelling of a field); both given: an error.
void rename(json& o, const char* from, const char* to, const Reader& r, const std::string& where) {
  if (!o.is_object() || !o.contains(from)) return;
  if (o.contains(to))
    r.fail(Reader::join(where, from), std::string("only one of ") + from + " and " + to);
  o[to] = o.at(from);
  o.erase(from);
}

// The spellings of shared/research/distributed.md's example file, accepted beside the canonical
// ones: device.peak_tflops.bf16, mem_gib, mem_gbps; fabric.link_GBps_per_direction and
// fabric.hosts (informational); a top-level efficiency and a null calibration.
void accept_other_spellings(json& j, const Reader& r) {
  if (!j.is_object()) return;
  if (j.contains("device") && j.at("device").is_object()) {
    json& d = j["device"];
    if (d.contains("peak_tflops")) {
      const json& p = d.at("peak_tflops");
      if (!p.is_object() || !p.contains("bf16"))
        r.fail("device.peak_tflops", "an object with a bf16 figure");
      if (d.contains("bf16_tflops")) r.fail("device.peak_tflops", "only one of it and bf16_tflops");
      d["bf16_tflops"] = p.at("bf16");
      d.erase("peak_tflops");
    }
    rename(d, "mem_gib", "memory_gib", r, "device");
    rename(d, "mem_gbps", "memory_GBps", r, "device");
    rename(d, "mem_GBps", "memory_GBps", r, "device");
    if (j.contains("efficiency")) {
      if (d.contains("efficiency")) r.fail("efficiency", "only one of it and device.efficiency");
      d["efficiency"] = j.at("efficiency");
    }
  }
  j.erase("efficiency");
  if (j.contains("calibration")) {
    if (!j.at("calibration").is_null())
      r.fail("calibration",
             "null (a measured machine is --topology local, kept with "
             "--write-topology)");
    j.erase("calibration");
  }
  if (j.contains("fabric") && j.at("fabric").is_object()) {
    json& f = j["fabric"];
    rename(f, "link_GBps_per_direction", "link_GBps", r, "fabric");
    if (f.contains("hosts")) {
      if (!f.at("hosts").is_array()) r.fail("fabric.hosts", "an array of device lists");
      f.erase("hosts");  // which chips share a host: not used by the link model
    }
  }
}

// "collective_fits": [{"collective": "all_reduce", "group": 4, "latency_us": 15, "GBps": 1.1}]
void read_collective_fits(const json& j, const Reader& r, Topology& t) {
  if (!j.contains("collective_fits")) return;
  const std::set<std::string> kinds = {"all_to_all",     "all_gather", "all_reduce",
                                       "reduce_scatter", "send_recv",  "broadcast"};
  const json& list = j.at("collective_fits");
  if (!list.is_array() || list.size() > 1024)
    r.fail("collective_fits",
           "an array of at most 1024 objects {collective, group, latency_us, GBps}");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = str_cat("collective_fits[", i, "]");
    const json& f = r.object(list[i], at, {"collective", "group", "latency_us", "GBps"});
    Topology::CollectiveFit fit;
    fit.kind = r.text(f, at, "collective", true);
    if (!kinds.count(fit.kind))
      r.fail(at + ".collective",
             "all_to_all, all_gather, all_reduce, reduce_scatter, send_recv or broadcast, got \"" +
                 fit.kind + "\"");
    fit.group = r.integer(f, at, "group", true, 0);
    if (fit.group < 2) r.fail(at + ".group", "a group of at least 2 ranks");
    fit.latency = r.number(f, at, "latency_us", true, 0, -1e-300) * 1e-6;
    fit.bandwidth = r.number(f, at, "GBps", true, 0) * 1e9;
    if (fit.latency > 1e6) r.fail(at + ".latency_us", "at most 1e12 (microseconds)");
    if (fit.bandwidth < 1e-3 || fit.bandwidth > 1e18) r.fail(at + ".GBps", "1e-12 to 1e9");
    for (const auto& other : t.collective_fits)
      if (other.kind == fit.kind && other.group == fit.group)
        r.fail(at, str_cat("one fit per collective and group (", fit.kind, " on ", fit.group,
                           " ranks given twice)"));
    t.collective_fits.push_back(fit);
  }
  std::sort(t.collective_fits.begin(), t.collective_fits.end(), [](const auto& a, const auto& b) {
    return a.kind != b.kind ? a.kind < b.kind : a.group < b.group;
  });
}

// "collective_waits": [{"group": 4, "compute_us": 10000, "wait_us": 300}, ...]
void read_collective_waits(const json& j, const Reader& r, Topology& t) {
  if (!j.contains("collective_waits")) return;
  const json& list = j.at("collective_waits");
  if (!list.is_array() || list.size() > 1024)
    r.fail("collective_waits", "an array of at most 1024 objects {group, compute_us, wait_us}");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = str_cat("collective_waits[", i, "]");
    const json& e = r.object(list[i], at, {"group", "compute_us", "wait_us"});
    Topology::CollectiveWait w;
    w.group = r.integer(e, at, "group", true, 0);
    if (w.group < 2) r.fail(at + ".group", "a group of at least 2 ranks");
    w.compute = r.number(e, at, "compute_us", true, 0) * 1e-6;
    w.wait = r.number(e, at, "wait_us", true, 0, -1e-300) * 1e-6;
    if (w.compute < 1e-9 || w.compute > 1e6)
      r.fail(at + ".compute_us", "1e-3 to 1e12 (microseconds)");
    if (w.wait > 1e6) r.fail(at + ".wait_us", "at most 1e12 (microseconds)");
    for (const auto& other : t.collective_waits)
      if (other.group == w.group && other.compute >= w.compute)
        r.fail(at + ".compute_us",
               str_cat("more than the earlier entries of group ", w.group, " (increasing)"));
    t.collective_waits.push_back(w);
  }
  std::stable_sort(t.collective_waits.begin(), t.collective_waits.end(),
                   [](const auto& a, const auto& b) { return a.group < b.group; });
}

}  // namespace

Topology parse_topology(const std::string& json_text, const std::string& source) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    throw_input_error(source, ": not valid JSON (", e.what(), ")");
  }
  const Reader r(source);
  accept_other_spellings(j, r);
  r.object(j, "",
           {"name", "device", "fabric", "collective_latency_us", "collective_fits",
            "collective_waits", "notes"});
  Topology t;
  t.source = source;
  t.name = r.text(j, "", "name", true);
  t.notes = r.text(j, "", "notes", false);
  if (!j.contains("device")) r.fail("device", "an object (missing)");
  const json& d =
      r.object(j.at("device"), "device",
               {"kind", "bf16_tflops", "fp32_tflops", "memory_gib", "memory_GBps", "efficiency",
                "efficiency_by_rows", "pack_GBps", "background_shares_cores", "time_shared_cores"});
  t.device.kind = r.text(d, "device", "kind", true);
  t.device.bf16_flops = r.number(d, "device", "bf16_tflops", true, 0) * 1e12;
  t.device.fp32_flops = r.number(d, "device", "fp32_tflops", false, 0) * 1e12;
  t.device.memory_bytes = r.number(d, "device", "memory_gib", true, 0) * 1073741824.0;
  t.device.memory_bandwidth = r.number(d, "device", "memory_GBps", true, 0) * 1e9;
  t.device.pack_bandwidth = r.number(d, "device", "pack_GBps", false, 0) * 1e9;
  if (d.contains("background_shares_cores")) {
    if (!d.at("background_shares_cores").is_boolean())
      r.fail("device.background_shares_cores", "true or false");
    t.device.background_shares_cores = d.at("background_shares_cores").get<bool>();
  }
  if (d.contains("time_shared_cores")) {
    const json& c = d.at("time_shared_cores");
    if (!c.is_number_integer() || c.get<int64_t>() < 1 || c.get<int64_t>() > 65536)
      r.fail("device.time_shared_cores", "an integer in 1..65536");
    t.device.time_shared_cores = c.get<int>();
  }
  if (d.contains("efficiency")) {
    const json& e = r.object(d.at("efficiency"), "device.efficiency",
                             {"gemm", "attention", "memory", "conv", "conv_fp32"});
    for (auto [key, field] : {std::pair{"gemm", &t.device.gemm_efficiency},
                              std::pair{"attention", &t.device.attention_efficiency},
                              std::pair{"memory", &t.device.memory_efficiency},
                              std::pair{"conv", &t.device.conv_efficiency},
                              std::pair{"conv_fp32", &t.device.conv_fp32_efficiency}}) {
      *field = r.number(e, "device.efficiency", key, false, *field);
      if (*field > 1) r.fail(std::string("device.efficiency.") + key, "a share of peak in (0, 1]");
    }
  }
  if (d.contains("efficiency_by_rows")) {
    const json& list = d.at("efficiency_by_rows");
    if (!list.is_array() || list.empty() || list.size() > 64)
      r.fail("device.efficiency_by_rows",
             "an array of 1 to 64 objects {rows, gemm, attention, memory}");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string at = str_cat("device.efficiency_by_rows[", i, "]");
      const json& e = r.object(list[i], at, {"rows", "gemm", "attention", "memory"});
      DeviceSpec::RowsEfficiency x;
      if (!e.contains("rows") || !e.at("rows").is_number_integer() ||
          e.at("rows").get<int64_t>() < 1 || e.at("rows").get<int64_t>() > (int64_t{1} << 40))
        r.fail(at + ".rows", "a positive integer (the rows one rank runs)");
      x.rows = e.at("rows").get<int64_t>();
      if (!t.device.efficiency_by_rows.empty() && x.rows <= t.device.efficiency_by_rows.back().rows)
        r.fail(at + ".rows", str_cat("more than the entry before's ",
                                     t.device.efficiency_by_rows.back().rows, " (increasing)"));
      for (auto [key, field] : {std::pair{"gemm", &x.gemm}, std::pair{"attention", &x.attention},
                                std::pair{"memory", &x.memory}}) {
        *field = r.number(e, at, key, true, 0);
        if (*field > 1) r.fail(at + "." + key, "a share of peak in (0, 1]");
      }
      t.device.efficiency_by_rows.push_back(x);
    }
  }
  t.collective_latency = r.number(j, "", "collective_latency_us", false, 10, -1e-300) * 1e-6;
  read_collective_fits(j, r, t);
  read_collective_waits(j, r, t);
  if (!j.contains("fabric")) r.fail("fabric", "an object (missing)");
  const json& f = j.at("fabric");
  if (!f.is_object()) r.fail("fabric", "an object");
  const std::string kind = r.text(f, "fabric", "kind", true);
  if (kind == "torus") {
    r.object(f, "fabric", {"kind", "dims", "wrap", "link_GBps", "hop_latency_us"});
    t.fabric = FabricKind::kTorus;
    if (!f.contains("dims") || !f.at("dims").is_array() || f.at("dims").empty() ||
        f.at("dims").size() > 3)
      r.fail("fabric.dims", "an array of 1 to 3 positive integers");
    for (size_t i = 0; i < f.at("dims").size(); ++i) {
      const json& v = f.at("dims")[i];
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 4096)
        r.fail(str_cat("fabric.dims[", i, "]"), str_cat("a positive integer, got ", v.dump()));
      t.dims.push_back(v.get<int>());
    }
    int64_t chips = 1;
    for (int d : t.dims) chips *= d;
    if (chips > 65536) r.fail("fabric.dims", "at most 65536 devices in all");
    if (!f.contains("wrap") || !f.at("wrap").is_array() || f.at("wrap").size() != t.dims.size())
      r.fail("fabric.wrap",
             str_cat("an array of ", t.dims.size(), " booleans (wrap-around links per dimension)"));
    for (size_t i = 0; i < t.dims.size(); ++i) {
      if (!f.at("wrap")[i].is_boolean()) r.fail(str_cat("fabric.wrap[", i, "]"), "true or false");
      t.wrap.push_back(f.at("wrap")[i].get<bool>());
    }
    t.link_bandwidth = r.number(f, "fabric", "link_GBps", true, 0) * 1e9;
    t.hop_latency = r.number(f, "fabric", "hop_latency_us", false, 1, -1e-300) * 1e-6;
  } else if (kind == "switch") {
    r.object(f, "fabric", {"kind", "nodes", "devices_per_node", "intra", "inter"});
    t.fabric = FabricKind::kSwitch;
    t.nodes = r.integer(f, "fabric", "nodes", false, 1);
    t.devices_per_node = r.integer(f, "fabric", "devices_per_node", true, 1);
    if (!f.contains("intra")) r.fail("fabric.intra", "an object (missing)");
    const json& in = r.object(f.at("intra"), "fabric.intra",
                              {"kind", "GBps", "latency_us", "devices_per_switch", "host_GBps"});
    t.intra = r.text(in, "fabric.intra", "kind", true);
    if (t.intra != "nvswitch" && t.intra != "pcie" && t.intra != "shm")
      r.fail("fabric.intra.kind", "nvswitch, pcie or shm, got \"" + t.intra + "\"");
    t.intra_bandwidth = r.number(in, "fabric.intra", "GBps", true, 0) * 1e9;
    t.intra_latency = r.number(in, "fabric.intra", "latency_us", false, 2, -1e-300) * 1e-6;
    if (t.intra == "pcie") {
      t.pcie_switch_devices =
          r.integer(in, "fabric.intra", "devices_per_switch", false, t.devices_per_node);
      t.host_bandwidth = r.number(in, "fabric.intra", "host_GBps", true, 0) * 1e9;
    }
    if (t.nodes > 1) {
      if (!f.contains("inter")) r.fail("fabric.inter", "an object (several nodes need a network)");
      const json& net = r.object(f.at("inter"), "fabric.inter", {"GBps", "latency_us"});
      t.inter_bandwidth = r.number(net, "fabric.inter", "GBps", true, 0) * 1e9;
      t.inter_latency = r.number(net, "fabric.inter", "latency_us", false, 5, -1e-300) * 1e-6;
    }
    if (static_cast<int64_t>(t.nodes) * t.devices_per_node > 65536)
      r.fail("fabric", "at most 65536 devices");
  } else {
    r.fail("fabric.kind", "torus or switch, got \"" + kind + "\"");
  }
  if (t.devices() > 65536) r.fail("fabric.dims", "at most 65536 devices");
  t.build();
  return t;
}

std::string topology_to_json(const Topology& t) {
  json dev = {{"kind", t.device.kind},
              {"bf16_tflops", t.device.bf16_flops * 1e-12},
              {"fp32_tflops", t.device.peak_flops(true) * 1e-12},
              {"memory_gib", t.device.memory_bytes / 1073741824.0},
              {"memory_GBps", t.device.memory_bandwidth * 1e-9},
              {"efficiency",
               {{"gemm", t.device.gemm_efficiency},
                {"attention", t.device.attention_efficiency},
                {"memory", t.device.memory_efficiency},
                {"conv", t.device.conv_share(false)},
                {"conv_fp32", t.device.conv_share(true)}}}};
  if (!t.device.efficiency_by_rows.empty()) {
    json list = json::array();
    for (const auto& e : t.device.efficiency_by_rows)
      list.push_back(
          {{"rows", e.rows}, {"gemm", e.gemm}, {"attention", e.attention}, {"memory", e.memory}});
    dev["efficiency_by_rows"] = list;
  }
  if (t.device.pack_bandwidth > 0) dev["pack_GBps"] = t.device.pack_bandwidth * 1e-9;
  if (t.device.background_shares_cores) dev["background_shares_cores"] = true;
  if (t.device.time_shared_cores > 0) dev["time_shared_cores"] = t.device.time_shared_cores;
  json f;
  if (t.fabric == FabricKind::kTorus) {
    f = {{"kind", "torus"},
         {"dims", t.dims},
         {"wrap", t.wrap},
         {"link_GBps", t.link_bandwidth * 1e-9},
         {"hop_latency_us", t.hop_latency * 1e6}};
  } else {
    json intra = {{"kind", t.intra},
                  {"GBps", t.intra_bandwidth * 1e-9},
                  {"latency_us", t.intra_latency * 1e6}};
    if (t.intra == "pcie") {
      intra["devices_per_switch"] = t.pcie_switch_devices;
      intra["host_GBps"] = t.host_bandwidth * 1e-9;
    }
    f = {{"kind", "switch"},
         {"nodes", t.nodes},
         {"devices_per_node", t.devices_per_node},
         {"intra", intra}};
    if (t.nodes > 1)
      f["inter"] = {{"GBps", t.inter_bandwidth * 1e-9}, {"latency_us", t.inter_latency * 1e6}};
  }
  json out = {{"name", t.name},
              {"device", dev},
              {"fabric", f},
              {"collective_latency_us", t.collective_latency * 1e6},
              {"notes", t.notes}};
  if (!t.collective_fits.empty()) {
    out["collective_fits"] = json::array();
    for (const auto& f : t.collective_fits)
      out["collective_fits"].push_back({{"collective", f.kind},
                                        {"group", f.group},
                                        {"latency_us", f.latency * 1e6},
                                        {"GBps", f.bandwidth * 1e-9}});
  }
  if (!t.collective_waits.empty()) {
    out["collective_waits"] = json::array();
    for (const auto& w : t.collective_waits)
      out["collective_waits"].push_back(
          {{"group", w.group}, {"compute_us", w.compute * 1e6}, {"wait_us", w.wait * 1e6}});
  }
  return out.dump(2);
}

Topology load_topology(const std::string& name_or_path, const std::string& flag) {
  if (auto p = topology_preset(name_or_path)) return *p;
  // Other spellings of the presets: builtin:tpu-v5e:2x4, tpu-v5e:2x4, gpu:h100-nvswitch-x8.
  std::string name = name_or_path;
  if (name.rfind("builtin:", 0) == 0) name = name.substr(8);
  for (const char* family : {"gpu:", "cpu:"})
    if (name.rfind(family, 0) == 0) name = name.substr(4);
  if (const auto colon = name.find(':'); colon != std::string::npos) name[colon] = '-';
  if (name != name_or_path) {
    if (auto p = topology_preset(name)) return *p;
  }
  if (name_or_path == "local")
    throw_input_error(flag, ": local is measured by `vidax plan --topology local --devices N`; ",
                      "keep it with --write-topology FILE and give the file here");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(name_or_path, ec)) {
    std::string names;
    for (const auto& n : topology_preset_names()) names += (names.empty() ? "" : ", ") + n;
    throw_input_error(flag, ": \"", name_or_path,
                      "\" is neither a preset nor a topology file; presets: ", names);
  }
  std::ifstream in(name_or_path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) throw_input_error(flag, ": cannot read ", name_or_path);
  if (text.str().size() > (16u << 20)) throw_input_error(name_or_path, ": larger than 16 MiB");
  return parse_topology(text.str(), name_or_path);
}

}  // namespace vidax::plan
