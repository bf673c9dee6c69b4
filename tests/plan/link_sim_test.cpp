// Topologies and the link-load simulation against hand-computed cases: routes on small tori with
// and without wrap-around, the bytes each link carries in an all-to-all on a line, a ring and a
// square, several groups contending for one link, the all-reduce's two rounds, switch fabrics.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "plan/link_sim.h"
#include "plan/placement.h"
#include "plan/topology.h"

namespace vidax::plan {
namespace {

using dist::CollectiveKind;
using dist::MeshAxis;
using dist::MeshSpec;
using dist::ScheduledOp;

Topology torus(std::vector<int> dims, std::vector<bool> wrap, double gbps = 1, double hop_us = 0,
               double collective_us = 0) {
  std::string d, w;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) {
      d += ',';
      w += ',';
    }
    d += std::to_string(dims[i]);
    w += wrap[i] ? "true" : "false";
  }
  return parse_topology(
      R"({"name":"t","device":{"kind":"x","bf16_tflops":1,"memory_gib":1,"memory_GBps":1},)"
      R"("collective_latency_us":)" +
          std::to_string(collective_us) + R"(,"fabric":{"kind":"torus","dims":[)" + d +
          R"(],"wrap":[)" + w + R"(],"link_GBps":)" + std::to_string(gbps) +
          R"(,"hop_latency_us":)" + std::to_string(hop_us) + "}}",
      "test");
}

ScheduledOp op(CollectiveKind kind, MeshAxis axis, double bytes, int64_t calls = 1) {
  ScheduledOp o;
  o.cls = dist::OpClass::kCollective;
  o.kind = kind;
  o.axis = axis;
  o.bytes = bytes;
  o.calls = calls;
  return o;
}

Placement identity(int n) {
  Placement p;
  for (int i = 0; i < n; ++i) p.device_of_rank.push_back(i);
  return p;
}

double max_load(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

// The load of the link from device a to device b.
double load_on(const Topology& t, const std::vector<double>& load, int a, int b) {
  for (size_t l = 0; l < t.links().size(); ++l)
    if (t.links()[l].from == a && t.links()[l].to == b) return load[l];
  ADD_FAILURE() << "no link " << a << "->" << b;
  return -1;
}

TEST(Topology, RoutesFollowDimensionOrderAndWrapAround) {
  const Topology line = torus({4}, {false});
  EXPECT_EQ(line.links().size(), 6u);  // 3 neighbour pairs, both directions
  EXPECT_EQ(line.route(0, 3).size(), 3u);
  EXPECT_EQ(line.route(3, 0).size(), 3u);
  const Topology ring = torus({4}, {true});
  EXPECT_EQ(ring.links().size(), 8u);
  EXPECT_EQ(ring.route(0, 3).size(), 1u);  // the wrap-around link
  EXPECT_EQ(ring.links()[static_cast<size_t>(ring.route(0, 3)[0])].to, 3);
  EXPECT_EQ(ring.route(0, 2).size(), 2u);  // a tie goes the + way
  EXPECT_EQ(ring.links()[static_cast<size_t>(ring.route(0, 2)[0])].to, 1);
  // 2 x 3 grid, dimension 0 first: (0,0) -> (1,2) goes to (1,0), then (1,1), (1,2).
  const Topology grid = torus({2, 3}, {false, false});
  const std::vector<int> r = grid.route(0, 5);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(grid.links()[static_cast<size_t>(r[0])].to, 1);
  EXPECT_EQ(grid.links()[static_cast<size_t>(r[1])].to, 3);
  EXPECT_EQ(grid.links()[static_cast<size_t>(r[2])].to, 5);
  EXPECT_EQ(grid.device_name(5), "(1,2)");
  // A dimension of two has one link each way, wrap or not.
  EXPECT_EQ(torus({2}, {true}).links().size(), 2u);
}

TEST(LinkSim, AllToAllLoadsOnALineARingAndASquare) {
  const ScheduledOp a2a = op(CollectiveKind::kAllToAll, MeshAxis::kUlysses, 100);
  const MeshSpec u4{1, 1, 4, 1};
  // Line 0-1-2-3: link 1->2 carries 0->2, 0->3, 1->2, 1->3; link 0->1 carries 0->1, 0->2, 0->3.
  const Topology line = torus({4}, {false});
  const std::vector<double> l = round_link_bytes(line, identity(4), u4, a2a);
  EXPECT_DOUBLE_EQ(load_on(line, l, 1, 2), 400);
  EXPECT_DOUBLE_EQ(load_on(line, l, 0, 1), 300);
  EXPECT_DOUBLE_EQ(load_on(line, l, 2, 1), 400);
  EXPECT_DOUBLE_EQ(max_load(l), 400);
  // Ring of 4: link i->i+1 carries i->i+1, i->i+2 (first hop), i-1->i+1 (second hop).
  const Topology ring = torus({4}, {true});
  const std::vector<double> r = round_link_bytes(ring, identity(4), u4, a2a);
  EXPECT_DOUBLE_EQ(load_on(ring, r, 0, 1), 300);
  EXPECT_DOUBLE_EQ(load_on(ring, r, 1, 0), 100);  // only the distance-1 message the - way
  EXPECT_DOUBLE_EQ(max_load(r), 300);
  // 2 x 2 square: every link carries its neighbour's message and one diagonal's first hop.
  const Topology square = torus({2, 2}, {false, false});
  const std::vector<double> s = round_link_bytes(square, identity(4), u4, a2a);
  EXPECT_DOUBLE_EQ(max_load(s), 200);
  for (double v : s) EXPECT_DOUBLE_EQ(v, 200);
  // Time of the round: latency + the longest route's hops + the busiest link at 1 GB/s.
  const Topology slow_line = torus({4}, {false}, 1, 2, 10);
  const CollectiveTime t = collective_time(slow_line, identity(4), u4, a2a);
  EXPECT_EQ(t.rounds, 1);
  EXPECT_NEAR(t.seconds, 10e-6 + 3 * 2e-6 + 400 / 1e9, 1e-12);
  LinkModel memo(slow_line, identity(4), u4);
  EXPECT_NEAR(memo.time(a2a).seconds, t.seconds, 1e-15);
  EXPECT_NEAR(memo.time(op(CollectiveKind::kAllToAll, MeshAxis::kUlysses, 300, 2)).seconds,
              2 * (10e-6 + 6e-6 + 1200 / 1e9), 1e-15);
}

TEST(LinkSim, GroupsRunningAtOnceShareLinks) {
  // Two tp pairs on a line of 4. Adjacent ({0,1}, {2,3}): each message has its own link.
  // Interleaved ({0,2}, {1,3}): 0->2 and 1->3 both cross link 1->2.
  const Topology line = torus({4}, {false});
  const MeshSpec m{2, 1, 1, 2};  // cfg=2 x tp=2; tp groups {0,1} and {2,3} in rank order
  const ScheduledOp ar = op(CollectiveKind::kAllReduce, MeshAxis::kTp, 1000);
  EXPECT_DOUBLE_EQ(max_load(round_link_bytes(line, identity(4), m, ar)), 500);  // n / 2 each
  Placement interleaved;
  interleaved.device_of_rank = {0, 2, 1, 3};
  const std::vector<double> l = round_link_bytes(line, interleaved, m, ar);
  EXPECT_DOUBLE_EQ(load_on(line, l, 1, 2), 1000);
  const CollectiveTime t = collective_time(line, interleaved, m, ar);
  EXPECT_EQ(t.rounds, 2);                           // all-to-all of blocks, all-gather of the sums
  EXPECT_NEAR(t.seconds, 2 * (1000 / 1e9), 1e-15);  // no latencies in this topology
}

TEST(LinkSim, RingPassesAndSwitchFabrics) {
  const Topology ring = torus({4}, {true});
  const ScheduledOp pass = op(CollectiveKind::kSendRecv, MeshAxis::kRing, 64, 3);
  const std::vector<double> l = round_link_bytes(ring, identity(4), {1, 4, 1, 1}, pass);
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(load_on(ring, l, i, (i + 1) % 4), 64);
  EXPECT_EQ(collective_time(ring, identity(4), {1, 4, 1, 1}, pass).rounds, 3);
  // A reduce-scatter sends each peer its whole block (as dist::Group counts it).
  const ScheduledOp rs = op(CollectiveKind::kReduceScatter, MeshAxis::kRing, 64);
  const std::vector<double> r2 = round_link_bytes(ring, identity(4), {1, 4, 1, 1}, rs);
  EXPECT_DOUBLE_EQ(load_on(ring, r2, 1, 0), 64);  // 1 -> 0 only
  EXPECT_DOUBLE_EQ(load_on(ring, r2, 0, 1), 3 * 64);
  // Two nodes of two GPUs: a cross-node all-gather leaves through each GPU's NIC.
  const Topology two = parse_topology(
      R"({"name":"g","device":{"kind":"g","bf16_tflops":1,"memory_gib":1,"memory_GBps":1},)"
      R"("fabric":{"kind":"switch","nodes":2,"devices_per_node":2,)"
      R"("intra":{"kind":"nvswitch","GBps":100},"inter":{"GBps":10}}})",
      "test");
  EXPECT_EQ(two.route(0, 1).size(), 2u);  // up to the switch, down
  EXPECT_EQ(two.links()[static_cast<size_t>(two.route(0, 2)[0])].kind, "nic");
  const ScheduledOp ag = op(CollectiveKind::kAllGather, MeshAxis::kCfg, 1e6);
  // cfg groups in rank order (cfg=2 x tp=2): {0,2} and {1,3}: across the nodes.
  const CollectiveTime cross = collective_time(two, identity(4), {2, 1, 1, 2}, ag);
  EXPECT_NEAR(cross.seconds, 10e-6 + 10e-6 + 1e6 / 10e9, 1e-12);  // two NIC hops of 5 us
  // With tp across the nodes instead, the cfg pairs stay inside one.
  Placement swapped;
  swapped.device_of_rank = {0, 2, 1, 3};
  const CollectiveTime inside = collective_time(two, swapped, {2, 1, 1, 2}, ag);
  EXPECT_NEAR(inside.seconds, 10e-6 + 4e-6 + 1e6 / 100e9, 1e-12);
}

TEST(Placement, EnumeratesAxisAndDeviceOrdersOnce) {
  const Topology t = torus({2, 4}, {false, false});
  const MeshSpec m{2, 1, 4, 1};
  const std::vector<Placement> all = enumerate_placements(t, m);
  ASSERT_GE(all.size(), 3u);
  EXPECT_NE(all[0].description.find("rank order"), std::string::npos);
  // Ulysses as a 2x2 square and as a line of four both appear.
  bool square = false, line = false;
  for (const auto& p : all) {
    square = square || p.description.find("ulysses=4 2x2") != std::string::npos;
    line = line || p.description.find("ulysses=4 1x4") != std::string::npos;
    std::vector<int> d = p.device_of_rank;
    std::sort(d.begin(), d.end());
    for (int i = 0; i < 8; ++i) EXPECT_EQ(d[static_cast<size_t>(i)], i);  // a permutation
  }
  EXPECT_TRUE(square);
  EXPECT_TRUE(line);
  // The square halves the busiest link of the exchange against the line (hand-computed above).
  const ScheduledOp a2a = op(CollectiveKind::kAllToAll, MeshAxis::kUlysses, 100);
  double best = 1e30, worst = 0;
  for (const auto& p : all) {
    const double b = max_load(round_link_bytes(t, p, m, a2a));
    best = std::min(best, b);
    worst = std::max(worst, b);
  }
  EXPECT_DOUBLE_EQ(best, 200);
  EXPECT_DOUBLE_EQ(worst, 400);
}

TEST(Topology, PresetsParseAndBadFilesNameTheField) {
  for (const std::string& name : topology_preset_names()) {
    if (name == "local") continue;  // measured, not a file
    const auto t = topology_preset(name);
    ASSERT_TRUE(t.has_value()) << name;
    EXPECT_GT(t->devices(), 1) << name;
    EXPECT_GT(t->device.bf16_flops, 0) << name;
    for (int b = 1; b < t->devices(); b += 3) EXPECT_FALSE(t->route(0, b).empty()) << name;
  }
  EXPECT_EQ(topology_preset("tpu-v5e-4x8")->devices(), 32);
  EXPECT_EQ(topology_preset("h100-nvswitch-x8-ib-x2")->devices(), 16);
  const std::string dev = R"("device":{"kind":"x","bf16_tflops":1,"memory_gib":1,"memory_GBps":1})";
  auto error_of = [](const std::string& text) {
    try {
      parse_topology(text, "topo.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("{").find("topo.json: not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(R"({"name":"a",)" + dev +
                     R"(,"fabric":{"kind":"torus","dims":[2,2],"wrap":[true],"link_GBps":1}})")
                .find("fabric.wrap: expected an array of 2 booleans"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"name":"a",)" + dev +
                     R"(,"fabric":{"kind":"torus","dims":[2,0],"wrap":[true,true],"link_GBps":1}})")
                .find("fabric.dims[1]: expected a positive integer"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"name":"a",)" + dev +
                     R"(,"fabric":{"kind":"torus","dims":[2],"wrap":[true],"link_GBps":-1}})")
                .find("fabric.link_GBps: expected a number above 0"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"name":"a",)" + dev + R"(,"fabric":{"kind":"mesh"}})")
                .find("fabric.kind: expected torus or switch"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"name":"a",)" + dev + R"(,"fabrik":{}})").find("fabrik"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"name":"a","device":{"kind":"x","bf16_tflops":1,"memory_gib":1},)"
                     R"("fabric":{"kind":"torus","dims":[2],"wrap":[false],"link_GBps":1}})")
                .find("device.memory_GBps: expected a number"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"name":"a",)" + dev +
                     R"(,"fabric":{"kind":"switch","nodes":2,"devices_per_node":2,)"
                     R"("intra":{"kind":"nvswitch","GBps":1}}})")
                .find("fabric.inter: expected an object"),
            std::string::npos);
  EXPECT_THROW(load_topology("no-such-preset"), InputError);
  EXPECT_THROW(load_topology("local"), InputError);  // measured by vidax plan, not a preset
  // Other spellings: the research notes' preset names and example file.
  EXPECT_EQ(load_topology("builtin:tpu-v5e:2x4").name, "tpu-v5e-2x4");
  EXPECT_EQ(load_topology("gpu:h100-nvswitch-x8").devices(), 8);
  const Topology notes = parse_topology(
      R"({ "name": "tpu-v5e-2x4",
           "device": {"kind": "tpu-v5e", "peak_tflops": {"bf16": 197}, "mem_gib": 16,
                      "mem_gbps": 819},
           "fabric": {"kind": "torus", "dims": [2, 4], "wrap": [false, false],
                      "link_GBps_per_direction": 50, "hop_latency_us": 1.0,
                      "hosts": [[0,1,2,3,4,5,6,7]]},
           "efficiency": {"gemm": 0.66, "attention": 0.37},
           "calibration": null,
           "notes": "the example of shared/research/distributed.md" })",
      "notes.json");
  EXPECT_EQ(notes.devices(), 8);
  EXPECT_DOUBLE_EQ(notes.device.bf16_flops, 197e12);
  EXPECT_DOUBLE_EQ(notes.device.memory_bandwidth, 819e9);
  EXPECT_DOUBLE_EQ(notes.link_bandwidth, 50e9);
  EXPECT_DOUBLE_EQ(notes.device.gemm_efficiency, 0.66);
  EXPECT_NE(error_of(R"({"name":"a","device":{"kind":"x","bf16_tflops":1,"peak_tflops":{"bf16":2},)"
                     R"("memory_gib":1,"memory_GBps":1},)"
                     R"("fabric":{"kind":"torus","dims":[2],"wrap":[false],"link_GBps":1}})")
                .find("device.peak_tflops: expected only one"),
            std::string::npos);
  EXPECT_NE(
      error_of(R"({"name":"a",)" + dev +
               R"(,"fabric":{"kind":"torus","dims":[4096,4096,129],"wrap":[false,false,false],)"
               R"("link_GBps":1}})")
          .find("at most 65536 devices"),
      std::string::npos);
  EXPECT_NE(error_of(R"({"name":"a",)" + dev + R"(,"collective_latency_us":-1,)" +
                     R"("fabric":{"kind":"torus","dims":[2],"wrap":[false],"link_GBps":1}})")
                .find("collective_latency_us: expected a number >= 0"),
            std::string::npos);
}

// Shares measured at several per-rank row counts: read, checked, written back, and interpolated
// in log(rows) between neighbours (clamped at the ends).
TEST(Topology, EfficiencyByRowsInterpolatesAndRoundTrips) {
  const std::string head =
      R"({"name":"cpu","device":{"kind":"cpu","bf16_tflops":1,"memory_gib":1,"memory_GBps":10,)"
      R"("efficiency":{"gemm":0.5,"attention":0.4,"memory":0.6},"efficiency_by_rows":)";
  const std::string tail = R"(},"fabric":{"kind":"switch","nodes":1,"devices_per_node":2,)"
                           R"("intra":{"kind":"shm","GBps":5}}})";
  const Topology t = parse_topology(head +
                                        R"([{"rows":100,"gemm":0.2,"attention":0.1,"memory":0.3},)"
                                        R"({"rows":400,"gemm":0.6,"attention":0.5,"memory":0.9}])" +
                                        tail,
                                    "rows.json");
  ASSERT_EQ(t.device.efficiency_by_rows.size(), 2u);
  // Below, at and above the ends: the end's shares.
  EXPECT_DOUBLE_EQ(t.device.at_rows(10).gemm_efficiency, 0.2);
  EXPECT_DOUBLE_EQ(t.device.at_rows(100).attention_efficiency, 0.1);
  EXPECT_DOUBLE_EQ(t.device.at_rows(5000).memory_efficiency, 0.9);
  // 200 rows lie halfway between 100 and 400 in log(rows).
  const DeviceSpec mid = t.device.at_rows(200);
  EXPECT_NEAR(mid.gemm_efficiency, 0.4, 1e-12);
  EXPECT_NEAR(mid.attention_efficiency, 0.3, 1e-12);
  EXPECT_NEAR(mid.memory_efficiency, 0.6, 1e-12);
  // Without a table the scalar shares hold for every row count.
  DeviceSpec plain = t.device;
  plain.efficiency_by_rows.clear();
  EXPECT_DOUBLE_EQ(plain.at_rows(200).gemm_efficiency, 0.5);
  // Written back and read again: the same table.
  const Topology again = parse_topology(topology_to_json(t), "again.json");
  ASSERT_EQ(again.device.efficiency_by_rows.size(), 2u);
  EXPECT_EQ(again.device.efficiency_by_rows[1].rows, 400);
  EXPECT_DOUBLE_EQ(again.device.efficiency_by_rows[1].attention, 0.5);
  EXPECT_NEAR(again.device.at_rows(200).gemm_efficiency, 0.4, 1e-12);

  auto error_of = [&](const std::string& table) {
    try {
      parse_topology(head + table + tail, "rows.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of(R"([{"rows":400,"gemm":0.6,"attention":0.5,"memory":0.9},)"
                     R"({"rows":100,"gemm":0.2,"attention":0.1,"memory":0.3}])")
                .find("rows.json: device.efficiency_by_rows[1].rows: expected more than the "
                      "entry before's 400"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"rows":100,"gemm":1.5,"attention":0.1,"memory":0.3}])")
                .find("device.efficiency_by_rows[0].gemm: expected a share of peak in (0, 1]"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"rows":100,"gemm":0.5,"memory":0.3}])")
                .find("device.efficiency_by_rows[0].attention: expected a number"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"rows":0,"gemm":0.5,"attention":0.1,"memory":0.3}])")
                .find("device.efficiency_by_rows[0].rows: expected a positive integer"),
            std::string::npos);
  EXPECT_NE(error_of(R"([])").find("device.efficiency_by_rows: expected an array of 1 to 64"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"rows":10,"gemm":0.5,"attention":0.1,"memory":0.3,"x":1}])")
                .find("device.efficiency_by_rows[0].x"),
            std::string::npos);
}

// The f32 peak and the VAE convolutions' shares: defaults (half the bf16 peak, the GEMM share),
// given, written back, and out of range.
TEST(Topology, ConvolutionSharesAndTheF32PeakRoundTrip) {
  const auto parse = [](const std::string& device_extra, const std::string& efficiency_extra) {
    return parse_topology(
        R"({"name":"g","device":{"kind":"g","bf16_tflops":100,"memory_gib":1,"memory_GBps":10,)" +
            device_extra + R"("efficiency":{"gemm":0.5)" + efficiency_extra +
            R"(}},"fabric":{"kind":"switch","nodes":1,"devices_per_node":2,)"
            R"("intra":{"kind":"nvswitch","GBps":5}}})",
        "conv.json");
  };
  const Topology plain = parse("", "");
  EXPECT_DOUBLE_EQ(plain.device.peak_flops(true), 50e12);
  EXPECT_DOUBLE_EQ(plain.device.conv_share(false), 0.5);
  EXPECT_DOUBLE_EQ(plain.device.conv_share(true), 0.5);
  const Topology given = parse(R"("fp32_tflops":30,)", R"(,"conv":0.25,"conv_fp32":0.75)");
  EXPECT_DOUBLE_EQ(given.device.peak_flops(true), 30e12);
  EXPECT_DOUBLE_EQ(given.device.peak_flops(false), 100e12);
  EXPECT_DOUBLE_EQ(given.device.conv_share(false), 0.25);
  EXPECT_DOUBLE_EQ(given.device.conv_share(true), 0.75);
  const Topology again = parse_topology(topology_to_json(given), "again.json");
  EXPECT_DOUBLE_EQ(again.device.peak_flops(true), 30e12);
  EXPECT_DOUBLE_EQ(again.device.conv_share(false), 0.25);
  EXPECT_DOUBLE_EQ(again.device.conv_share(true), 0.75);
  const auto error_of = [&](const std::string& device_extra, const std::string& efficiency_extra) {
    try {
      parse(device_extra, efficiency_extra);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("", R"(,"conv":1.5)").find("device.efficiency.conv: expected a share"),
            std::string::npos);
  EXPECT_NE(error_of("", R"(,"conv_fp32":0)").find("device.efficiency.conv_fp32"),
            std::string::npos);
  EXPECT_NE(error_of(R"("fp32_tflops":"fast",)", "").find("device.fp32_tflops: expected a number"),
            std::string::npos);
  EXPECT_NE(error_of(R"("time_shared_cores":0,)", "").find("device.time_shared_cores"),
            std::string::npos);
  // Processes time-sharing 2 cores: while `active` of them compute, each gets up to a core.
  const Topology shared = parse(R"("time_shared_cores":2,)", "");
  EXPECT_DOUBLE_EQ(shared.device.alone_speedup(1, 4), 2.0);  // rank 0 alone: a core, not half
  EXPECT_DOUBLE_EQ(shared.device.alone_speedup(2, 4), 2.0);
  EXPECT_DOUBLE_EQ(shared.device.alone_speedup(4, 4), 1.0);
  EXPECT_DOUBLE_EQ(shared.device.alone_speedup(6, 8), 2.0 * 8 / (6 * 2));
  EXPECT_DOUBLE_EQ(shared.device.alone_speedup(1, 2), 1.0);  // no more processes than cores
  EXPECT_DOUBLE_EQ(plain.device.alone_speedup(1, 4), 1.0);
  EXPECT_EQ(parse_topology(topology_to_json(shared), "again").device.time_shared_cores, 2);
}

// Collectives measured on the machine: a fit per kind and group size (the nearest group's when
// the size was not measured) and the waits table, read, checked, looked up, written back.
TEST(Topology, CollectiveFitsAndWaitsAreLookedUpAndRoundTrip) {
  const std::string head =
      R"({"name":"cpu","device":{"kind":"cpu","bf16_tflops":1,"memory_gib":1,"memory_GBps":10},)"
      R"("fabric":{"kind":"switch","nodes":1,"devices_per_node":8,"intra":{"kind":"shm","GBps":5}})";
  const std::string fits =
      R"(,"collective_fits":[{"collective":"all_reduce","group":4,"latency_us":10,"GBps":1},)"
      R"({"collective":"all_reduce","group":2,"latency_us":5,"GBps":2},)"
      R"({"collective":"send_recv","group":8,"latency_us":1,"GBps":4}])";
  const std::string waits =
      R"(,"collective_waits":[{"group":4,"compute_us":1000,"wait_us":100},)"
      R"({"group":4,"compute_us":100000,"wait_us":300},{"group":2,"compute_us":1000,"wait_us":50}])";
  const Topology t = parse_topology(head + fits + waits + "}", "m.json");
  ASSERT_EQ(t.collective_fits.size(), 3u);
  const auto* f2 = t.collective_fit("all_reduce", 2);
  ASSERT_NE(f2, nullptr);
  EXPECT_DOUBLE_EQ(f2->latency, 5e-6);
  EXPECT_DOUBLE_EQ(f2->bandwidth, 2e9);
  EXPECT_EQ(t.collective_fit("all_reduce", 3)->group, 4);  // a tie: the larger group
  EXPECT_EQ(t.collective_fit("all_reduce", 8)->group, 4);
  EXPECT_EQ(t.collective_fit("send_recv", 2)->group, 8);
  EXPECT_EQ(t.collective_fit("all_to_all", 2), nullptr);
  // Waits: linear from none up to the first entry, log-interpolated between, clamped after.
  EXPECT_DOUBLE_EQ(t.wait_at_collective(4, 0), 0);
  EXPECT_NEAR(t.wait_at_collective(4, 500e-6), 50e-6, 1e-12);
  EXPECT_NEAR(t.wait_at_collective(4, 10e-3), 200e-6, 1e-12);  // halfway in log(compute)
  EXPECT_NEAR(t.wait_at_collective(4, 1.0), 300e-6, 1e-12);
  EXPECT_NEAR(t.wait_at_collective(2, 10e-3), 50e-6, 1e-12);
  EXPECT_NEAR(t.wait_at_collective(8, 10e-3), 200e-6, 1e-12);  // the nearest group: 4
  EXPECT_DOUBLE_EQ(parse_topology(head + "}", "none.json").wait_at_collective(4, 1.0), 0);
  // Written back and read again: the same tables.
  const Topology again = parse_topology(topology_to_json(t), "again.json");
  ASSERT_EQ(again.collective_fits.size(), 3u);
  EXPECT_DOUBLE_EQ(again.collective_fit("send_recv", 8)->bandwidth, 4e9);
  EXPECT_NEAR(again.wait_at_collective(4, 10e-3), 200e-6, 1e-12);

  auto error_of = [&](const std::string& extra) {
    try {
      parse_topology(head + extra + "}", "m.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(
      error_of(R"(,"collective_fits":[{"collective":"gather","group":2,"latency_us":1,"GBps":1}])")
          .find("m.json: collective_fits[0].collective: expected all_to_all, all_gather"),
      std::string::npos);
  EXPECT_NE(error_of(R"(,"collective_fits":[{"collective":"all_reduce","group":1,)"
                     R"("latency_us":1,"GBps":1}])")
                .find("collective_fits[0].group: expected a group of at least 2 ranks"),
            std::string::npos);
  EXPECT_NE(error_of(R"(,"collective_fits":[{"collective":"all_reduce","group":2,)"
                     R"("latency_us":1,"GBps":0}])")
                .find("collective_fits[0].GBps: expected a number above 0"),
            std::string::npos);
  EXPECT_NE(error_of(R"(,"collective_fits":[{"collective":"all_reduce","group":2,)"
                     R"("latency_us":1,"GBps":1},{"collective":"all_reduce","group":2,)"
                     R"("latency_us":2,"GBps":1}])")
                .find("collective_fits[1]: expected one fit per collective and group"),
            std::string::npos);
  EXPECT_NE(
      error_of(R"(,"collective_fits":{"all_reduce":1})").find("collective_fits: expected an array"),
      std::string::npos);
  EXPECT_NE(error_of(R"(,"collective_waits":[{"group":2,"compute_us":10,"wait_us":-1}])")
                .find("collective_waits[0].wait_us: expected a number >= 0"),
            std::string::npos);
  EXPECT_NE(error_of(R"(,"collective_waits":[{"group":2,"compute_us":10,"wait_us":1},)"
                     R"({"group":2,"compute_us":10,"wait_us":2}])")
                .find("collective_waits[1].compute_us: expected more than the earlier entries "
                      "of group 2"),
            std::string::npos);
  EXPECT_NE(error_of(R"(,"collective_waits":[{"group":2,"compute_us":1e-9,"wait_us":1}])")
                .find("collective_waits[0].compute_us: expected 1e-3 to 1e12 (microseconds)"),
            std::string::npos);
  EXPECT_NE(error_of(R"(,"collective_waits":[{"group":2,"compute_us":10}])")
                .find("collective_waits[0].wait_us: expected a number (missing)"),
            std::string::npos);
}

// A measured fit prices a collective at latency + bytes one rank sends / rate per call where
// that is longer than the links' time (the machine's floor beside the fabric's); without one, or
// for a background collective, the links alone.
TEST(LinkSim, MeasuredFitsAreAFloorBesideTheLinks) {
  const std::string head =
      R"({"name":"cpu","device":{"kind":"cpu","bf16_tflops":1,"memory_gib":1,"memory_GBps":10},)"
      R"("collective_latency_us":0,)"
      R"("fabric":{"kind":"switch","nodes":1,"devices_per_node":4,)"
      R"("intra":{"kind":"shm","GBps":1,"latency_us":0}})";
  const Topology links = parse_topology(head + "}", "links");
  const Topology fitted = parse_topology(
      head + R"(,"collective_fits":[{"collective":"all_reduce","group":4,"latency_us":20,)"
             R"("GBps":0.5}]})",
      "fitted");
  const MeshSpec mesh{1, 1, 1, 4};
  const ScheduledOp reduce = op(CollectiveKind::kAllReduce, MeshAxis::kTp, 4e6, 3);
  // 4 MB on 4 ranks: each sends 2 * 4 MB * 3/4 = 6 MB per call at 0.5 GB/s, plus 20 us.
  EXPECT_NEAR(collective_time(fitted, identity(4), mesh, reduce).seconds, 3 * (20e-6 + 6e6 / 0.5e9),
              1e-12);
  LinkModel model(fitted, identity(4), mesh);
  EXPECT_NEAR(model.time(reduce).seconds, 3 * (20e-6 + 6e6 / 0.5e9), 1e-12);
  // The links: two rounds, each port sends 3/4 of 4 MB at 1 GB/s.
  EXPECT_NEAR(collective_time(links, identity(4), mesh, reduce).seconds, 3 * 2 * 3e6 / 1e9, 1e-12);
  // A fit faster than the links leaves the links' time.
  const Topology fast = parse_topology(
      head + R"(,"collective_fits":[{"collective":"all_reduce","group":4,"latency_us":0,)"
             R"("GBps":100}]})",
      "fast");
  EXPECT_NEAR(collective_time(fast, identity(4), mesh, reduce).seconds, 3 * 2 * 3e6 / 1e9, 1e-12);
  LinkModel fast_model(fast, identity(4), mesh);
  EXPECT_NEAR(fast_model.time(reduce).seconds, 3 * 2 * 3e6 / 1e9, 1e-12);
  // A background collective (a prefetch beside the compute) is simulated too.
  ScheduledOp prefetch = reduce;
  prefetch.overlapped = true;
  EXPECT_DOUBLE_EQ(collective_time(fitted, identity(4), mesh, prefetch).seconds,
                   collective_time(links, identity(4), mesh, prefetch).seconds);
  // A kind without a fit is simulated on the links in either topology.
  const ScheduledOp gather = op(CollectiveKind::kAllGather, MeshAxis::kTp, 1e6);
  EXPECT_DOUBLE_EQ(collective_time(fitted, identity(4), mesh, gather).seconds,
                   collective_time(links, identity(4), mesh, gather).seconds);
}

}  // namespace
}  // namespace vidax::plan
