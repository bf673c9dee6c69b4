// Link emulation under mpirun: with a modelled topology installed, each collective of the mesh's
// groups lasts at least the duration the link model gives it (and the process groups count that
// time) and the stretch is gone once it is removed; bad placements are refused.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "core/error.h"
#include "dist/mesh.h"
#include "dist/world.h"
#include "plan/link_emulation.h"
#include "plan/topology.h"

namespace vidax::dist {
namespace {

TEST(LinkEmulation, CollectivesTakeTheirModelledDuration) {
  const int n = world().size();
  if (n < 2) GTEST_SKIP() << "needs two processes";
  // A line of n devices at 0.05 GB/s per link, 1 ms per round.
  const std::string dims = std::to_string(n);
  const plan::Topology topo = plan::parse_topology(
      R"({"name":"slow","device":{"kind":"x","bf16_tflops":1,"memory_gib":1,"memory_GBps":1},)"
      R"("collective_latency_us":1000,"fabric":{"kind":"torus","dims":[)" +
          dims + R"(],"wrap":[false],"link_GBps":0.05}})",
      "test");
  MeshSpec spec;
  spec.ulysses = n;
  Mesh mesh(spec, world());
  plan::install_link_emulation(topo, spec, plan::parse_placement("", n, n, "test"));
  const int64_t per_peer = 100000;  // floats to each peer
  std::vector<float> in(static_cast<size_t>(per_peer * n), 1.0f), out(in.size());
  ScheduledOp op;
  op.cls = OpClass::kCollective;
  op.kind = CollectiveKind::kAllToAll;
  op.axis = MeshAxis::kUlysses;
  op.bytes = static_cast<double>(per_peer) * 4;
  const double modelled =
      plan::collective_time(topo, plan::parse_placement("", n, n, "test"), spec, op).seconds;
  ASSERT_GT(modelled, 0.008);  // at least the busiest link's 400 KB at 50 MB/s
  mesh.reset_stats();
  const auto t0 = std::chrono::steady_clock::now();
  mesh.ulysses().all_to_all(in.data(), out.data(), per_peer, DType::kF32);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(took, modelled * 0.999);  // a lower bound only: the sleep guarantees it
  EXPECT_GE(mesh.stats().seconds[static_cast<size_t>(CollectiveKind::kAllToAll)], modelled * 0.999);
  // Off again: no stretch is applied (no wall-clock upper bound here: a loaded CI machine may
  // take any time).
  ASSERT_TRUE(collective_stretch_installed());
  set_collective_stretch(nullptr);
  EXPECT_FALSE(collective_stretch_installed());
  mesh.reset_stats();
  mesh.ulysses().all_to_all(in.data(), out.data(), per_peer, DType::kF32);
  EXPECT_EQ(mesh.stats().calls[static_cast<size_t>(CollectiveKind::kAllToAll)], 1);
}

TEST(LinkEmulation, PlacementsAreChecked) {
  EXPECT_EQ(plan::parse_placement("1,0,3,2", 4, 4, "p").device_of_rank,
            (std::vector<int>{1, 0, 3, 2}));
  EXPECT_THROW(plan::parse_placement("0,0,1,2", 4, 4, "p"), InputError);
  EXPECT_THROW(plan::parse_placement("0,1,2", 4, 4, "p"), InputError);
  EXPECT_THROW(plan::parse_placement("0,1,2,9", 4, 4, "p"), InputError);
  EXPECT_THROW(plan::parse_placement("0,x,1,2", 4, 4, "p"), InputError);
}

}  // namespace
}  // namespace vidax::dist
