// libFuzzer target: the planner's two file formats, the topology file (plan/topology.h, the link
// graph built from it and a route through it) and the plan file `generate --plan` reads
// (plan/plan_file.h). Any input must give a topology or plan, or an InputError; never a crash,
// a hang or a sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "plan/plan_file.h"
#include "plan/topology.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const vidax::plan::Topology t = vidax::plan::parse_topology(text, "fuzz.json");
    const int n = t.devices();
    if (n < 1 || n > 65536) __builtin_trap();  // the parser bounds the device count
    if (n <= 4096) {  // a route between two devices crosses at most every link once
      const size_t hops = t.route(0, n - 1).size();
      if (hops > t.links().size()) __builtin_trap();
    }
    // Every peak and share a price divides by is positive (shares at most 1).
    for (bool fp32 : {false, true})
      if (!(t.device.peak_flops(fp32) > 0) || !(t.device.conv_share(fp32) > 0) ||
          t.device.conv_share(fp32) > 1)
        __builtin_trap();
    // The measured tables give finite, non-negative prices.
    for (int group : {2, 3, 8}) {
      const double w = t.wait_at_collective(group, 0.02);
      if (!(w >= 0) || w > 1e7) __builtin_trap();
      if (const auto* f = t.collective_fit("all_reduce", group))
        if (!(f->bandwidth > 0) || !(f->latency >= 0)) __builtin_trap();
    }
    (void)vidax::plan::parse_topology(vidax::plan::topology_to_json(t), "again");
  } catch (const vidax::InputError&) {
  }
  try {
    const vidax::plan::PlanFile p = vidax::plan::parse_plan_file(text, "fuzz.json");
    if (p.devices != p.mesh.size() || static_cast<int>(p.device_of_rank.size()) != p.devices)
      __builtin_trap();
  } catch (const vidax::InputError&) {
  }
  return 0;
}
