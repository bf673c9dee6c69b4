#include "plan/placement.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <string>

#include "core/error.h"

namespace vidax::plan {
namespace {

using dist::MeshAxis;

struct AxisDim {
  MeshAxis axis;
  int size;
};

// The mesh's axes larger than one, innermost first in the runtime's rank order.
std::vector<AxisDim> active_axes(const dist::MeshSpec& m) {
  std::vector<AxisDim> a;
  for (AxisDim d : {AxisDim{MeshAxis::kTp, m.tp}, AxisDim{MeshAxis::kUlysses, m.ulysses},
                    AxisDim{MeshAxis::kRing, m.ring}, AxisDim{MeshAxis::kCfg, m.cfg}})
    if (d.size > 1) a.push_back(d);
  return a;
}

int coordinate(const dist::MeshSpec& m, int r, MeshAxis axis) {
  const dist::MeshCoord k = dist::mesh_coord(m, r);
  switch (axis) {
    case MeshAxis::kTp:
      return k.tp;
    case MeshAxis::kUlysses:
      return k.ulysses;
    case MeshAxis::kRing:
      return k.ring;
    case MeshAxis::kCfg:
      return k.cfg;
    case MeshAxis::kSp:
      return k.ring * m.ulysses + k.ulysses;
  }
  return 0;
}

// Device numberings: on a torus, devices sorted with dimension perm[0] varying fastest.
std::vector<std::vector<int>> device_orders(const Topology& t) {
  const int n = t.devices();
  std::vector<int> identity(static_cast<size_t>(n));
  std::iota(identity.begin(), identity.end(), 0);
  if (t.fabric != FabricKind::kTorus || t.dims.size() < 2) return {identity};
  std::vector<size_t> perm(t.dims.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::vector<std::vector<int>> orders;
  do {
    std::vector<int> order = identity;
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      const std::vector<int> ca = t.coords(a), cb = t.coords(b);
      for (size_t k = perm.size(); k-- > 0;)  // the last of perm is the slowest
        if (ca[perm[k]] != cb[perm[k]]) return ca[perm[k]] < cb[perm[k]];
      return false;
    });
    orders.push_back(std::move(order));
  } while (std::next_permutation(perm.begin(), perm.end()));
  return orders;
}

}  // namespace

Placement rank_order_placement(const Topology& topology, const dist::MeshSpec& mesh) {
  VIDAX_CHECK(topology.devices() == mesh.size(), "rank_order_placement: ", topology.devices(),
              " devices for ", mesh.size(), " ranks");
  Placement p;
  p.device_of_rank.resize(static_cast<size_t>(mesh.size()));
  std::iota(p.device_of_rank.begin(), p.device_of_rank.end(), 0);
  p.description = "rank order: " + describe_placement(topology, mesh, p.device_of_rank);
  return p;
}

std::vector<Placement> enumerate_placements(const Topology& topology, const dist::MeshSpec& mesh) {
  std::vector<Placement> out{rank_order_placement(topology, mesh)};
  std::set<std::vector<int>> seen{out.front().device_of_rank};
  std::vector<AxisDim> axes = active_axes(mesh);
  std::sort(axes.begin(), axes.end(),
            [](const AxisDim& a, const AxisDim& b) { return a.axis < b.axis; });
  const std::vector<std::vector<int>> orders = device_orders(topology);
  do {
    for (const auto& order : orders) {
      Placement p;
      p.device_of_rank.resize(static_cast<size_t>(mesh.size()));
      for (int r = 0; r < mesh.size(); ++r) {
        int index = 0, stride = 1;
        for (const AxisDim& a : axes) {  // axes[0] innermost
          index += coordinate(mesh, r, a.axis) * stride;
          stride *= a.size;
        }
        p.device_of_rank[static_cast<size_t>(r)] = order[static_cast<size_t>(index)];
      }
      if (!seen.insert(p.device_of_rank).second) continue;
      p.description = describe_placement(topology, mesh, p.device_of_rank);
      out.push_back(std::move(p));
    }
  } while (std::next_permutation(axes.begin(), axes.end(), [](const AxisDim& a, const AxisDim& b) {
    return a.axis < b.axis;
  }));
  return out;
}

std::string describe_placement(const Topology& t, const dist::MeshSpec& mesh,
                               const std::vector<int>& device_of_rank) {
  std::string s;
  for (const AxisDim& a : active_axes(mesh)) {
    // The group of rank 0 along the axis.
    std::vector<int> devs;
    for (int r = 0; r < mesh.size(); ++r) {
      bool same = true;
      for (const AxisDim& o : active_axes(mesh))
        if (o.axis != a.axis && coordinate(mesh, r, o.axis) != 0) same = false;
      if (same) devs.push_back(device_of_rank[static_cast<size_t>(r)]);
    }
    std::string where;
    if (t.fabric == FabricKind::kTorus) {
      for (size_t k = 0; k < t.dims.size(); ++k) {
        std::set<int> values;
        for (int d : devs) values.insert(t.coords(d)[k]);
        if (k > 0) where += 'x';
        where += std::to_string(values.size());
      }
    } else {
      std::set<int> nodes;
      for (int d : devs) nodes.insert(t.node_of(d));
      where = nodes.size() == 1 ? std::string("in one node")
                                : str_cat("across ", nodes.size(), " nodes");
      if (t.intra == "pcie" && nodes.size() == 1) {
        std::set<int> sw;
        for (int d : devs) sw.insert((d % t.devices_per_node) / t.pcie_switch_devices);
        where += sw.size() == 1 ? std::string(", one PCIe switch")
                                : str_cat(", ", sw.size(), " PCIe switches");
      }
    }
    if (!s.empty()) s += "; ";
    s += dist::mesh_axis_name(a.axis);
    s += str_cat("=", a.size, " ", where);
  }
  return s.empty() ? "one device" : s;
}

}  // namespace vidax::plan
