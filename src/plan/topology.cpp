#include "plan/topology.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace vidax::plan {

double DeviceSpec::alone_speedup(int active, int devices) const {
  const int cores = time_shared_cores;
  if (cores <= 0 || devices <= cores || active <= 0) return 1.0;
  const double busy = static_cast<double>(std::min(cores, active));
  return std::max(1.0, busy * devices / (static_cast<double>(active) * cores));
}

double Topology::injection_bandwidth() const {
  double bw = 0;
  for (const Link& l : links_)
    if (l.from == 0) bw += l.bandwidth;
  return bw > 0 ? bw : 1e30;
}

DeviceSpec DeviceSpec::at_rows(int64_t rows) const {
  DeviceSpec d = *this;
  const std::vector<RowsEfficiency>& e = efficiency_by_rows;
  if (e.empty()) return d;
  const auto take = [&d](double gemm, double attention, double memory) {
    d.gemm_efficiency = gemm;
    d.attention_efficiency = attention;
    d.memory_efficiency = memory;
  };
  if (rows <= e.front().rows) {
    take(e.front().gemm, e.front().attention, e.front().memory);
    return d;
  }
  if (rows >= e.back().rows) {
    take(e.back().gemm, e.back().attention, e.back().memory);
    return d;
  }
  size_t i = 1;
  while (e[i].rows < rows) ++i;
  const RowsEfficiency &a = e[i - 1], &b = e[i];
  const double w = std::log(static_cast<double>(rows) / static_cast<double>(a.rows)) /
                   std::log(static_cast<double>(b.rows) / static_cast<double>(a.rows));
  take(a.gemm + w * (b.gemm - a.gemm), a.attention + w * (b.attention - a.attention),
       a.memory + w * (b.memory - a.memory));
  return d;
}

const Topology::CollectiveFit* Topology::collective_fit(const std::string& kind, int group) const {
  const CollectiveFit* best = nullptr;
  for (const CollectiveFit& f : collective_fits)
    if (f.kind == kind &&
        (best == nullptr || std::abs(f.group - group) <= std::abs(best->group - group)))
      best = &f;
  return best;
}

double Topology::wait_at_collective(int group, double compute) const {
  if (collective_waits.empty() || !(compute > 0)) return 0;
  // The measured group size nearest to `group` (the larger on a tie).
  int nearest = collective_waits.front().group;
  for (const CollectiveWait& w : collective_waits)
    if (std::abs(w.group - group) <= std::abs(nearest - group)) nearest = w.group;
  std::vector<const CollectiveWait*> e;
  for (const CollectiveWait& w : collective_waits)
    if (w.group == nearest) e.push_back(&w);
  if (compute <= e.front()->compute) return e.front()->wait * compute / e.front()->compute;
  if (compute >= e.back()->compute) return e.back()->wait;
  size_t i = 1;
  while (e[i]->compute < compute) ++i;
  const CollectiveWait &a = *e[i - 1], &b = *e[i];
  const double w = std::log(compute / a.compute) / std::log(b.compute / a.compute);
  return a.wait + w * (b.wait - a.wait);
}

int Topology::devices() const {
  if (fabric == FabricKind::kTorus) {
    int n = 1;
    for (int d : dims) n *= d;
    return n;
  }
  return nodes * devices_per_node;
}

std::vector<int> Topology::coords(int device) const {
  std::vector<int> c(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {  // dimension 0 varies fastest
    c[i] = device % dims[i];
    device /= dims[i];
  }
  return c;
}

int Topology::node_of(int device) const {
  return fabric == FabricKind::kSwitch ? device / devices_per_node : 0;
}

std::string Topology::device_name(int device) const {
  if (fabric == FabricKind::kSwitch)
    return str_cat("n", node_of(device), ":", device % devices_per_node);
  std::string s = "(";
  const std::vector<int> c = coords(device);
  for (size_t i = 0; i < c.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(c[i]);
  }
  return s + ")";
}

int Topology::torus_link(int device, size_t dim, int dir) const {
  return torus_link_[(static_cast<size_t>(device) * dims.size() + dim) * 2 + (dir > 0 ? 0 : 1)];
}

void Topology::build() {
  links_.clear();
  const int n = devices();
  if (n < 1) throw_input_error(source, ": the topology has no devices");
  if (fabric == FabricKind::kTorus) {
    if (dims.empty() || dims.size() > 3)
      throw_input_error(source, ": fabric.dims: expected 1 to 3 dimensions");
    if (wrap.size() != dims.size())
      throw_input_error(source, ": fabric.wrap: expected ", dims.size(), " flags (one per dim)");
    vertex_count_ = n;
    torus_link_.assign(static_cast<size_t>(n) * dims.size() * 2, -1);
    const double bw = link_bandwidth, lat = hop_latency;
    for (int d = 0; d < n; ++d) {
      const std::vector<int> c = coords(d);
      int stride = 1;
      for (size_t k = 0; k < dims.size(); ++k) {
        auto slot = [&](int dir) -> int& {
          return torus_link_[(static_cast<size_t>(d) * dims.size() + k) * 2 + (dir > 0 ? 0 : 1)];
        };
        if (dims[k] == 2) {  // one neighbour, one link each way: both directions use it
          const int peer = d + (1 - 2 * c[k]) * stride;
          slot(+1) = slot(-1) = static_cast<int>(links_.size());
          links_.push_back({d, peer, bw, lat, "ici"});
        } else if (dims[k] > 2) {
          for (int dir : {+1, -1}) {
            int to = c[k] + dir;
            if (to < 0 || to >= dims[k]) {
              if (!wrap[k]) continue;
              to = (to + dims[k]) % dims[k];
            }
            slot(dir) = static_cast<int>(links_.size());
            links_.push_back({d, d + (to - c[k]) * stride, bw, lat, "ici"});
          }
        }
        stride *= dims[k];
      }
    }
    return;
  }
  // Switch fabric: vertices = devices, one switch (or host) per node, PCIe switches, network.
  if (intra != "nvswitch" && intra != "pcie" && intra != "shm")
    throw_input_error(source, ": fabric.intra.kind: expected nvswitch, pcie or shm, got \"", intra,
                      "\"");
  if (intra == "pcie" && (pcie_switch_devices < 1 || devices_per_node % pcie_switch_devices != 0))
    throw_input_error(source, ": fabric.intra.devices_per_switch: expected a divisor of the ",
                      devices_per_node, " devices per node");
  const int groups_per_node = intra == "pcie" ? devices_per_node / pcie_switch_devices : 0;
  const int node_vertex0 = n, group_vertex0 = n + nodes,
            net = group_vertex0 + nodes * groups_per_node;
  vertex_count_ = net + 1;
  up_.assign(static_cast<size_t>(n), -1);
  down_ = up_, nic_up_ = up_, nic_down_ = up_;
  group_up_.assign(static_cast<size_t>(nodes * groups_per_node), -1);
  group_down_ = group_up_;
  auto add = [&](int from, int to, double bw, double lat, const char* kind) {
    links_.push_back({from, to, bw, lat, kind});
    return static_cast<int>(links_.size()) - 1;
  };
  for (int g = 0; g < nodes * groups_per_node; ++g) {
    const int gv = group_vertex0 + g, host = node_vertex0 + g / groups_per_node;
    group_up_[static_cast<size_t>(g)] = add(gv, host, host_bandwidth, intra_latency, "host");
    group_down_[static_cast<size_t>(g)] = add(host, gv, host_bandwidth, intra_latency, "host");
  }
  for (int d = 0; d < n; ++d) {
    const int node = node_of(d);
    const int first_hop = intra == "pcie" ? group_vertex0 + node * groups_per_node +
                                                (d % devices_per_node) / pcie_switch_devices
                                          : node_vertex0 + node;
    const char* kind = intra == "nvswitch" ? "nvlink" : intra == "pcie" ? "pcie" : "shm";
    up_[static_cast<size_t>(d)] = add(d, first_hop, intra_bandwidth, intra_latency, kind);
    down_[static_cast<size_t>(d)] = add(first_hop, d, intra_bandwidth, intra_latency, kind);
    if (nodes > 1) {
      nic_up_[static_cast<size_t>(d)] = add(d, net, inter_bandwidth, inter_latency, "nic");
      nic_down_[static_cast<size_t>(d)] = add(net, d, inter_bandwidth, inter_latency, "nic");
    }
  }
}

std::vector<int> Topology::route(int a, int b) const {
  std::vector<int> r;
  if (a == b) return r;
  if (fabric == FabricKind::kTorus) {
    std::vector<int> c = coords(a);
    const std::vector<int> t = coords(b);
    int at = a;
    for (size_t k = 0; k < dims.size(); ++k) {
      while (c[k] != t[k]) {
        const int fwd = (t[k] - c[k] + dims[k]) % dims[k];  // hops going +1 (with wrap)
        int dir;
        if (wrap[k]) {
          dir = fwd <= dims[k] - fwd ? +1 : -1;
        } else {
          dir = t[k] > c[k] ? +1 : -1;
        }
        const int l = torus_link(at, k, dir);
        VIDAX_CHECK(l >= 0, "torus route: no link");
        r.push_back(l);
        at = links_[static_cast<size_t>(l)].to;
        c[k] = (c[k] + dir + dims[k]) % dims[k];
      }
    }
    return r;
  }
  const auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
  if (node_of(a) != node_of(b)) return {nic_up_[ua], nic_down_[ub]};
  if (intra != "pcie") return {up_[ua], down_[ub]};
  const int ga = node_of(a) * (devices_per_node / pcie_switch_devices) +
                 (a % devices_per_node) / pcie_switch_devices;
  const int gb = node_of(b) * (devices_per_node / pcie_switch_devices) +
                 (b % devices_per_node) / pcie_switch_devices;
  if (ga == gb) return {up_[ua], down_[ub]};
  return {up_[ua], group_up_[static_cast<size_t>(ga)], group_down_[static_cast<size_t>(gb)],
          down_[ub]};
}

}  // namespace vidax::plan
