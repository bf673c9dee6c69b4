#include "plan/link_sim.h"

#include <algorithm>

#include "core/error.h"

namespace vidax::plan {
namespace {

using dist::CollectiveKind;
using dist::MeshAxis;

// One message of a round: group member `from` to member `to`, `bytes`.
struct Message {
  int from, to;
  double bytes;
};

// The messages of one round of `op` inside one group of n members.
std::vector<Message> round_messages(const dist::ScheduledOp& op, int n) {
  std::vector<Message> m;
  switch (op.kind) {
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kAllGather:
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
          if (i != j) m.push_back({i, j, op.bytes});
      break;
    case CollectiveKind::kAllReduce:  // blocks of 1/n of the vector
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
          if (i != j) m.push_back({i, j, op.bytes / n});
      break;
    case CollectiveKind::kReduceScatter:  // `bytes` (each rank's block) to every peer
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
          if (i != j) m.push_back({i, j, op.bytes});
      break;
    case CollectiveKind::kSendRecv:
      for (int i = 0; i < n; ++i) m.push_back({i, (i + 1) % n, op.bytes});
      break;
    case CollectiveKind::kBroadcast:
      for (int j = 1; j < n; ++j) m.push_back({0, j, op.bytes});
      break;
    case CollectiveKind::kBarrier:
    case CollectiveKind::kCount:
      break;
  }
  return m;
}

int rounds_per_call(CollectiveKind kind) { return kind == CollectiveKind::kAllReduce ? 2 : 1; }

// The topology's measured fit for `op`'s kind at its axis's group size; nullptr: none. The fits
// are measured between computing ranks, which is how a collective between ops runs; a background
// one (a sharded block's prefetch, `overlapped`) runs beside the compute without waiting for it
// and is left to the links.
const Topology::CollectiveFit* measured_fit(const Topology& topo, const dist::MeshSpec& mesh,
                                            const dist::ScheduledOp& op) {
  if (op.overlapped) return nullptr;
  return topo.collective_fit(dist::collective_name(op.kind), dist::axis_size(mesh, op.axis));
}

// Seconds of all calls of `op` as a measured fit prices them.
double fitted_seconds(const Topology::CollectiveFit& fit, const dist::ScheduledOp& op, int n) {
  const double sent = dist::collective_bytes_sent(op.kind, op.bytes, n);
  return static_cast<double>(op.calls) * (fit.latency + sent / fit.bandwidth);
}

}  // namespace

std::vector<std::vector<int>> axis_groups(const dist::MeshSpec& m, dist::MeshAxis axis) {
  std::vector<std::vector<int>> groups;
  for (int r = 0; r < m.size(); ++r) {
    // The group's first member: this rank with its coordinates on the axis zeroed.
    dist::MeshCoord first = dist::mesh_coord(m, r);
    switch (axis) {
      case MeshAxis::kCfg:
        first.cfg = 0;
        break;
      case MeshAxis::kRing:
        first.ring = 0;
        break;
      case MeshAxis::kUlysses:
        first.ulysses = 0;
        break;
      case MeshAxis::kTp:
        first.tp = 0;
        break;
      case MeshAxis::kSp:
        first.ring = first.ulysses = 0;
        break;
    }
    if (dist::mesh_rank(m, first) != r) continue;
    std::vector<int> g;
    const int n = dist::axis_size(m, axis);
    for (int i = 0; i < n; ++i) {
      dist::MeshCoord x = first;
      switch (axis) {
        case MeshAxis::kCfg:
          x.cfg = i;
          break;
        case MeshAxis::kRing:
          x.ring = i;
          break;
        case MeshAxis::kUlysses:
          x.ulysses = i;
          break;
        case MeshAxis::kTp:
          x.tp = i;
          break;
        case MeshAxis::kSp:  // sp rank = g U + u
          x.ring = i / m.ulysses;
          x.ulysses = i % m.ulysses;
          break;
      }
      g.push_back(dist::mesh_rank(m, x));
    }
    groups.push_back(std::move(g));
  }
  return groups;
}

std::vector<double> round_link_bytes(const Topology& topo, const Placement& p,
                                     const dist::MeshSpec& mesh, const dist::ScheduledOp& op) {
  std::vector<double> load(topo.links().size(), 0.0);
  const int n = dist::axis_size(mesh, op.axis);
  if (n <= 1) return load;
  const std::vector<Message> msgs = round_messages(op, n);
  for (const auto& g : axis_groups(mesh, op.axis))
    for (const Message& m : msgs) {
      const int a = p.device_of_rank[static_cast<size_t>(g[static_cast<size_t>(m.from)])];
      const int b = p.device_of_rank[static_cast<size_t>(g[static_cast<size_t>(m.to)])];
      for (int l : topo.route(a, b)) load[static_cast<size_t>(l)] += m.bytes;
    }
  return load;
}

CollectiveTime collective_time(const Topology& topo, const Placement& p, const dist::MeshSpec& mesh,
                               const dist::ScheduledOp& op) {
  CollectiveTime t;
  const int n = dist::axis_size(mesh, op.axis);
  if (n <= 1 || !op.collective()) return t;
  VIDAX_CHECK(static_cast<int>(p.device_of_rank.size()) == mesh.size(),
              "collective_time: placement of ", p.device_of_rank.size(), " ranks for a mesh of ",
              mesh.size());
  const std::vector<double> load = round_link_bytes(topo, p, mesh, op);
  double slowest = 0, path_latency = 0;
  for (size_t l = 0; l < load.size(); ++l) {
    if (load[l] <= 0) continue;
    const Link& link = topo.links()[l];
    slowest = std::max(slowest, load[l] / link.bandwidth);
    t.busiest_link_bytes = std::max(t.busiest_link_bytes, load[l]);
  }
  // The longest route's latency among the round's messages.
  const std::vector<Message> msgs = round_messages(op, n);
  for (const auto& g : axis_groups(mesh, op.axis))
    for (const Message& m : msgs) {
      double lat = 0;
      for (int l : topo.route(p.device_of_rank[static_cast<size_t>(g[static_cast<size_t>(m.from)])],
                              p.device_of_rank[static_cast<size_t>(g[static_cast<size_t>(m.to)])]))
        lat += topo.links()[static_cast<size_t>(l)].latency;
      path_latency = std::max(path_latency, lat);
    }
  t.rounds = static_cast<int>(op.calls) * rounds_per_call(op.kind);
  t.seconds = t.rounds * (topo.collective_latency + path_latency + slowest);
  if (const auto* fit = measured_fit(topo, mesh, op))
    t.seconds = std::max(t.seconds, fitted_seconds(*fit, op, n));
  return t;
}

CollectiveTime LinkModel::time(const dist::ScheduledOp& op) {
  CollectiveTime t;
  const int n = dist::axis_size(mesh_, op.axis);
  if (n <= 1 || !op.collective()) return t;
  const int key = static_cast<int>(op.axis) * 16 + static_cast<int>(op.kind);
  const Pattern* pat = nullptr;
  for (const auto& [k, v] : memo_)
    if (k == key) pat = &v;
  if (pat == nullptr) {
    dist::ScheduledOp unit = op;  // one call of one byte: loads and times scale linearly
    unit.bytes = 1;
    unit.calls = 1;
    const std::vector<double> load = round_link_bytes(topo_, placement_, mesh_, unit);
    Pattern p;
    for (size_t l = 0; l < load.size(); ++l) {
      if (load[l] <= 0) continue;
      p.seconds_per_byte = std::max(p.seconds_per_byte, load[l] / topo_.links()[l].bandwidth);
      p.bytes_per_byte = std::max(p.bytes_per_byte, load[l]);
    }
    unit.bytes = 0;
    p.latency = collective_time(topo_, placement_, mesh_, unit).seconds -
                topo_.collective_latency * rounds_per_call(op.kind);
    p.latency /= rounds_per_call(op.kind);
    memo_.emplace_back(key, p);
    pat = &memo_.back().second;
  }
  t.rounds = static_cast<int>(op.calls) * rounds_per_call(op.kind);
  t.busiest_link_bytes = pat->bytes_per_byte * op.bytes;
  t.seconds =
      t.rounds * (topo_.collective_latency + pat->latency + pat->seconds_per_byte * op.bytes);
  if (const auto* fit = measured_fit(topo_, mesh_, op))
    t.seconds = std::max(t.seconds, fitted_seconds(*fit, op, n));
  return t;
}

}  // namespace vidax::plan
