// The process group under mpirun -n 1, 2, 4 and 8 (CTest registers each; with -n 1 it is the
// size-1 group): data movement is exact, reductions give the same bits on every rank and equal
// a sum in rank order, counts are ragged, bf16 moves as 16-bit words, messages above the per-call
// limit (VIDAX_DIST_MAX_BYTES, set small by one registration) are split and reassembled, and the
// mesh's groups have the documented coordinates.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "dist/mesh.h"
#include "dist/world.h"

namespace vidax::dist {
namespace {

// A value only rank r at index i holds; exact in f32.
float value(int r, int64_t i) { return static_cast<float>(r * 1000 + i % 997) * 0.5f; }

TEST(Group, AllGatherVRaggedCounts) {
  Group& w = world();
  std::vector<int64_t> counts(static_cast<size_t>(w.size()));
  for (int r = 0; r < w.size(); ++r) counts[static_cast<size_t>(r)] = (r * 7) % 5;  // zeros too
  std::vector<float> mine(static_cast<size_t>(counts[static_cast<size_t>(w.rank())]));
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = value(w.rank(), static_cast<int64_t>(i));
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  std::vector<float> out(static_cast<size_t>(total), -1.0f);
  w.all_gather_v(mine.data(), out.data(), counts, DType::kF32);
  int64_t at = 0;
  for (int r = 0; r < w.size(); ++r)
    for (int64_t i = 0; i < counts[static_cast<size_t>(r)]; ++i)
      ASSERT_EQ(out[static_cast<size_t>(at++)], value(r, i)) << "from rank " << r;
}

TEST(Group, AllToAllVRaggedCounts) {
  Group& w = world();
  const int n = w.size(), me = w.rank();
  auto count = [](int from, int to) { return static_cast<int64_t>((from + 2 * to) % 4); };
  std::vector<int64_t> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
  std::vector<float> in;
  for (int q = 0; q < n; ++q) {
    send[static_cast<size_t>(q)] = count(me, q);
    recv[static_cast<size_t>(q)] = count(q, me);
    for (int64_t i = 0; i < count(me, q); ++i) in.push_back(value(me, q * 10 + i));
  }
  std::vector<float> out(
      static_cast<size_t>(std::accumulate(recv.begin(), recv.end(), int64_t{0})));
  w.all_to_all_v(in.data(), send, out.data(), recv, DType::kF32);
  size_t at = 0;
  for (int q = 0; q < n; ++q)
    for (int64_t i = 0; i < count(q, me); ++i) ASSERT_EQ(out[at++], value(q, me * 10 + i));
}

TEST(Group, AllToAllMovesBf16AsWords) {
  Group& w = world();
  const int n = w.size();
  const int64_t per = 33;
  std::vector<uint16_t> in(static_cast<size_t>(n * per)), out(in.size());
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint16_t>(0x7f80 + w.rank() * 64 + i);
  w.all_to_all(in.data(), out.data(), per, DType::kBF16);
  for (int q = 0; q < n; ++q)
    for (int64_t i = 0; i < per; ++i)
      ASSERT_EQ(out[static_cast<size_t>(q * per + i)],
                static_cast<uint16_t>(0x7f80 + q * 64 + w.rank() * per + i));
}

TEST(Group, AllReduceIsARankOrderSumWithTheSameBitsEverywhere) {
  Group& w = world();
  const int64_t n = 1031;  // not a multiple of any world size used
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> u(-1e3f, 1e3f);
  // Every rank can rebuild every rank's data, so it knows the expected rank-order sum.
  std::vector<std::vector<float>> all(static_cast<size_t>(w.size()), std::vector<float>(n));
  for (auto& v : all)
    for (auto& x : v) x = u(rng) * std::pow(10.0f, static_cast<float>(rng() % 7) - 3.0f);
  std::vector<float> data = all[static_cast<size_t>(w.rank())];
  w.all_reduce(data.data(), n, DType::kF32, ReduceOp::kSum);
  for (int64_t i = 0; i < n; ++i) {
    float expect = all[0][static_cast<size_t>(i)];
    for (int r = 1; r < w.size(); ++r)
      expect = expect + all[static_cast<size_t>(r)][static_cast<size_t>(i)];
    uint32_t a, b;
    std::memcpy(&a, &data[static_cast<size_t>(i)], 4);
    std::memcpy(&b, &expect, 4);
    EXPECT_EQ(a, b) << "element " << i;  // not ASSERT: the collective below must still run
    if (a != b) break;
  }
  // And the same bits on every rank: gather them.
  std::vector<float> everyone(static_cast<size_t>(n * w.size()));
  w.all_gather(data.data(), everyone.data(), n, DType::kF32);
  for (int r = 1; r < w.size(); ++r)
    ASSERT_EQ(std::memcmp(everyone.data(), everyone.data() + r * n, sizeof(float) * n), 0);
}

TEST(Group, AllReduceMaxAndInt64) {
  Group& w = world();
  std::vector<int64_t> v = {w.rank(), -w.rank(), int64_t{1} << 40};
  w.all_reduce(v.data(), 3, DType::kI64, ReduceOp::kMax);
  EXPECT_EQ(v[0], w.size() - 1);
  EXPECT_EQ(v[1], 0);
  std::vector<int64_t> s = {1, int64_t{1} << 40};
  w.all_reduce(s.data(), 2, DType::kI64, ReduceOp::kSum);
  EXPECT_EQ(s[0], w.size());
  EXPECT_EQ(s[1], (int64_t{1} << 40) * w.size());
}

TEST(Group, ReduceScatterGivesEachRankItsBlock) {
  Group& w = world();
  const int64_t count = 5;
  std::vector<float> in(static_cast<size_t>(count * w.size()));
  for (size_t i = 0; i < in.size(); ++i) in[i] = value(w.rank(), static_cast<int64_t>(i));
  std::vector<float> out(static_cast<size_t>(count));
  w.reduce_scatter(in.data(), out.data(), count, DType::kF32, ReduceOp::kSum);
  for (int64_t i = 0; i < count; ++i) {
    float expect = value(0, w.rank() * count + i);
    for (int r = 1; r < w.size(); ++r) expect = expect + value(r, w.rank() * count + i);
    EXPECT_EQ(out[static_cast<size_t>(i)], expect);
  }
}

TEST(Group, BroadcastAndSendRecvRing) {
  Group& w = world();
  std::vector<float> b(300, w.rank() == w.size() - 1 ? 7.5f : 0.0f);
  w.broadcast(b.data(), 300, DType::kF32, w.size() - 1);
  for (float x : b) ASSERT_EQ(x, 7.5f);
  const int next = (w.rank() + 1) % w.size(), prev = (w.rank() - 1 + w.size()) % w.size();
  std::vector<float> send(77, static_cast<float>(w.rank())), recv(77, -1.0f);
  w.send_recv(send.data(), 77, next, recv.data(), 77, prev, DType::kF32);
  for (float x : recv) ASSERT_EQ(x, static_cast<float>(prev));
}

TEST(Group, SendAndRecvPairUp) {
  Group& w = world();
  if (w.size() == 1) GTEST_SKIP() << "needs two ranks";
  // Even ranks send to the next odd rank, which answers; an odd world leaves the last one out.
  const int me = w.rank();
  std::vector<float> buf(1000);
  if (me % 2 == 0 && me + 1 < w.size()) {
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = value(me, static_cast<int64_t>(i));
    w.send(buf.data(), 1000, me + 1, DType::kF32);
    w.recv(buf.data(), 1000, me + 1, DType::kF32);
    for (size_t i = 0; i < buf.size(); ++i)
      ASSERT_EQ(buf[i], value(me + 1, static_cast<int64_t>(i)));
  } else if (me % 2 == 1) {
    w.recv(buf.data(), 1000, me - 1, DType::kF32);
    for (size_t i = 0; i < buf.size(); ++i)  // not ASSERT: the send below must still run
      EXPECT_EQ(buf[i], value(me - 1, static_cast<int64_t>(i)));
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = value(me, static_cast<int64_t>(i));
    w.send(buf.data(), 1000, me - 1, DType::kF32);
  }
}

TEST(Group, LargeMessagesAreSplitAndReassembled) {
  // 3 MiB per peer: above the 1 GiB default only when VIDAX_DIST_MAX_BYTES is set small (one
  // CTest registration sets it to 4096), but exact either way.
  Group& w = world();
  const int64_t per = (3 << 20) / 4 + 3;
  std::vector<float> in(static_cast<size_t>(per * w.size())), out(in.size());
  for (size_t i = 0; i < in.size(); ++i) in[i] = value(w.rank(), static_cast<int64_t>(i));
  w.all_to_all(in.data(), out.data(), per, DType::kF32);
  for (int q = 0; q < w.size(); ++q)
    for (int64_t i = 0; i < per; i += 4099)
      ASSERT_EQ(out[static_cast<size_t>(q * per + i)], value(q, w.rank() * per + i));
}

TEST(Group, StatsCountCallsAndBytes) {
  Group& w = world();
  w.reset_stats();
  std::vector<float> in(16 * w.size()), out(in.size());
  w.all_to_all(in.data(), out.data(), 16, DType::kF32);
  const auto k = static_cast<size_t>(CollectiveKind::kAllToAll);
  EXPECT_EQ(w.stats().calls[k], 1);
  EXPECT_EQ(w.stats().bytes_sent[k], 16 * 4 * (w.size() - 1));
}

TEST(Mesh, GroupsFollowTheDocumentedRankOrder) {
  Group& w = world();
  // Every factorisation of the world size into cfg x ring x ulysses (cfg <= 2).
  for (int c = 1; c <= 2; ++c) {
    for (int g = 1; g <= w.size(); ++g) {
      if (w.size() % (c * g) != 0) continue;
      MeshSpec spec;
      spec.cfg = c;
      spec.ring = g;
      spec.ulysses = w.size() / (c * g);
      Mesh mesh(spec, w);
      const int r = w.rank(), U = spec.ulysses, R = spec.ring;
      EXPECT_EQ(mesh.ulysses().rank(), r % U) << spec.str();
      EXPECT_EQ(mesh.ring().rank(), (r / U) % R) << spec.str();
      EXPECT_EQ(mesh.cfg_rank(), r / (U * R)) << spec.str();
      EXPECT_EQ(mesh.sp_rank(), r % (U * R)) << spec.str();
      EXPECT_EQ(mesh.sp().size(), U * R);
      // The sp group's members are consecutive world ranks in sp order.
      for (int i = 0; i < mesh.sp().size(); ++i)
        EXPECT_EQ(mesh.sp().world_ranks()[static_cast<size_t>(i)], (r / (U * R)) * U * R + i);
    }
  }
}

}  // namespace
}  // namespace vidax::dist

// Starts MPI when launched by mpirun; only rank 0 reports passing tests, every rank its failures.
class FailuresOnly : public ::testing::EmptyTestEventListener {
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "rank %d: %s:%d: %s\n", vidax::dist::world().rank(), r.file_name(),
                   r.line_number(), r.summary());
  }
};

int main(int argc, char** argv) {
  vidax::dist::init_world(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (vidax::dist::world().rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailuresOnly);
  }
  const int rc = RUN_ALL_TESTS();
  vidax::dist::world().barrier();
  vidax::dist::finalize_world();
  return rc;
}
