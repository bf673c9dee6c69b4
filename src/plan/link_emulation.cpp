#include "plan/link_emulation.h"

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>

#include "core/error.h"

namespace vidax::plan {

Placement parse_placement(const std::string& text, int ranks, int devices,
                          const std::string& source) {
  Placement p;
  if (text.empty()) {
    for (int r = 0; r < ranks; ++r) p.device_of_rank.push_back(r);
    p.description = "rank order";
    return p;
  }
  std::stringstream ss(text);
  std::set<int> seen;
  for (std::string item; std::getline(ss, item, ',');) {
    int d = -1;
    try {
      size_t used = 0;
      d = std::stoi(item, &used);
      if (used != item.size()) d = -1;
    } catch (const std::exception&) {
    }
    if (d < 0 || d >= devices || !seen.insert(d).second)
      throw_input_error(source, ": \"", item, "\" is not a device index below ", devices,
                        " used once");
    p.device_of_rank.push_back(d);
  }
  if (static_cast<int>(p.device_of_rank.size()) != ranks)
    throw_input_error(source, ": ", p.device_of_rank.size(), " devices for ", ranks, " ranks");
  p.description = text;
  return p;
}

void install_link_emulation(const Topology& topology, const dist::MeshSpec& mesh,
                            const Placement& placement) {
  if (topology.devices() < mesh.size() ||
      static_cast<int>(placement.device_of_rank.size()) != mesh.size())
    throw_input_error("VIDAX_SIMULATE_LINKS: the topology ", topology.name, " has ",
                      topology.devices(), " devices for a mesh of ", mesh.size(), " ranks");
  struct State {
    Topology topo;
    std::map<std::vector<int>, dist::MeshAxis> axis_of;  // a group's world ranks -> its axis
    std::unique_ptr<LinkModel> model;
    std::mutex mutex;
  };
  auto st = std::make_shared<State>();
  st->topo = topology;
  // Stretched to the modelled links only: the collective has already cost what this machine's
  // (measured) fits describe.
  st->topo.collective_fits.clear();
  for (dist::MeshAxis axis : {dist::MeshAxis::kCfg, dist::MeshAxis::kRing, dist::MeshAxis::kUlysses,
                              dist::MeshAxis::kTp, dist::MeshAxis::kSp})
    if (dist::axis_size(mesh, axis) > 1)
      for (const auto& g : axis_groups(mesh, axis)) st->axis_of.emplace(g, axis);
  st->model = std::make_unique<LinkModel>(st->topo, placement, mesh);
  dist::set_collective_stretch([st](dist::CollectiveKind kind, int64_t bytes_sent,
                                    const dist::Group& group) noexcept -> double {
    const auto it = st->axis_of.find(group.world_ranks());
    if (it == st->axis_of.end()) return 0;
    const double n = group.size(), sent = static_cast<double>(bytes_sent);
    dist::ScheduledOp op;
    op.cls = dist::OpClass::kCollective;
    op.kind = kind;
    op.axis = it->second;
    // Back from the bytes this rank sent to the argument's size (dist/schedule.h).
    switch (kind) {
      case dist::CollectiveKind::kAllToAll:
      case dist::CollectiveKind::kAllGather:
      case dist::CollectiveKind::kReduceScatter:
        op.bytes = sent / (n - 1);
        break;
      case dist::CollectiveKind::kAllReduce:
        op.bytes = sent * n / (2 * (n - 1));
        break;
      default:
        op.bytes = sent;
    }
    std::lock_guard lock(st->mutex);
    return st->model->time(op).seconds;
  });
}

}  // namespace vidax::plan
