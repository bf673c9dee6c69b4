// A machine for the topology planner: its devices (bf16 FLOP/s, memory, memory bandwidth, the
// share of peak each kind of op reaches) and the fabric between them, as a graph of directed
// links with bandwidth and latency plus the route a message takes between two devices.
//
// Fabrics:
//   torus   chips on a 1-3D grid (TPU slices): one link per neighbour and direction, a per-axis
//           wrap-around flag, dimension-order routing (shortest way round where it wraps);
//   switch  nodes of devices: inside a node an NVSwitch (every device one full-bandwidth port),
//           PCIe switches under a host bridge, or shared memory (CPU processes); between nodes
//           one NIC per device on a non-blocking network.
// Read from a JSON file (docs/planner.md gives the format) or a preset (topology_preset_names()).
// Plain value after construction; thread-safe to read.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace vidax::plan {

struct DeviceSpec {
  std::string kind;       // "tpu-v5e", "h100", "cpu"
  double bf16_flops = 0;  // peak FLOP/s (dense bf16)
  // Peak FLOP/s of f32 GEMMs and convolutions (an fp32 VAE): TF32 tensor cores on NVIDIA GPUs
  // (PyTorch's cuDNN convolutions use them by default), f32 FMA on CPUs; 0: half bf16_flops.
  double fp32_flops = 0;
  double memory_bytes = 0;      // memory one device holds
  double memory_bandwidth = 0;  // bytes/s
  // Share of the peak each op kind reaches (GEMMs, attention) and of the memory bandwidth
  // (memory-bound ops): assumptions unless measured (docs/planner.md).
  double gemm_efficiency = 0.6, attention_efficiency = 0.45, memory_efficiency = 0.7;
  // Share of the bf16 (f32) peak the convolutions of a bf16 (f32) VAE reach; 0: gemm_efficiency.
  double conv_efficiency = 0, conv_fp32_efficiency = 0;
  double conv_share(bool fp32) const {
    const double e = fp32 ? conv_fp32_efficiency : conv_efficiency;
    return e > 0 ? e : gemm_efficiency;
  }
  // Bytes/s of checkpoint weights packed into a runtime's layout (a sharded block after its
  // gather); 0: the gathered weights are used as they are (no cost).
  double pack_bandwidth = 0;
  // Background work (the sharded weights' loader) takes the compute's own cores (a CPU process
  // with one thread per core) instead of running beside it.
  bool background_shares_cores = false;
  // The devices are processes time-sharing this many cores (more processes than cores; the
  // figures above are each one's share); 0: not time-shared. A phase some ranks run while the
  // others wait (the VAE on rank 0) then runs faster: alone_speedup.
  int time_shared_cores = 0;
  // How much faster than its share a device runs while only `active` of the `devices` devices
  // compute (1 unless time-shared: the active ones get up to a core each).
  double alone_speedup(int active, int devices) const;
  // The three shares measured at several per-rank row counts (the local topology calibrates at
  // the rows of each sequence split), rows strictly increasing. A rank running `rows` tokens gets
  // the shares interpolated in log(rows) between its neighbours, clamped at the ends. Empty: the
  // three shares above for every mesh.
  struct RowsEfficiency {
    int64_t rows = 0;
    double gemm = 0, attention = 0, memory = 0;
  };
  std::vector<RowsEfficiency> efficiency_by_rows;

  // This device with the shares for a rank that runs `rows` tokens.
  DeviceSpec at_rows(int64_t rows) const;
  // The peak for GEMMs in bf16 or f32 (fp32_flops, or half the bf16 peak when not given).
  double peak_flops(bool fp32) const {
    return !fp32 ? bf16_flops : fp32_flops > 0 ? fp32_flops : bf16_flops / 2;
  }
};

struct Link {
  int from = 0, to = 0;  // vertices: devices first, then switches / hosts / network
  double bandwidth = 0;  // bytes/s in this direction
  double latency = 0;    // seconds per traversal
  std::string kind;      // "ici", "nvlink", "pcie", "host", "nic", "shm"
};

enum class FabricKind { kTorus, kSwitch };

struct Topology {
  std::string name, source;  // source: "preset" or the file
  DeviceSpec device;
  FabricKind fabric = FabricKind::kTorus;
  // torus: dims (dimension 0 varies fastest in device numbers), wrap-around per dim, each
  // link's bandwidth per direction and its latency per hop
  std::vector<int> dims;
  std::vector<bool> wrap;
  double link_bandwidth = 0, hop_latency = 0;
  // switch: `intra` "nvswitch" | "pcie" | "shm" with each device's port bandwidth (per
  // direction); under PCIe, switches of `pcie_switch_devices` devices joined by the host
  // (`host_bandwidth` per switch uplink); between nodes one NIC per device (`inter_*`)
  int nodes = 1, devices_per_node = 1;
  std::string intra;
  int pcie_switch_devices = 0;
  double intra_bandwidth = 0, intra_latency = 0, host_bandwidth = 0;
  double inter_bandwidth = 0, inter_latency = 0;
  // Fixed cost of one round of a collective (software, synchronisation), seconds.
  double collective_latency = 10e-6;
  // Measured collectives (the `local` topology, from `vidax bench comm`): per kind
  // (dist::collective_name) and group size, the time of one call with no data and the rate of the
  // bytes one rank sends (dist::collective_bytes_sent's convention), measured with the other
  // ranks computing between collectives as they do in a run. Where a kind has fits, its
  // collectives inside one node are priced by the fit of the nearest group size instead of by
  // the link simulation: a fit holds what the links do not (an all-reduce's arithmetic, copies
  // through shared memory that need both ends scheduled while other ranks compute on the same
  // cores). Empty for modelled topologies.
  struct CollectiveFit {
    std::string kind;
    int group = 0;
    double latency = 0, bandwidth = 0;  // seconds per call; bytes/s
  };
  std::vector<CollectiveFit> collective_fits;  // sorted by kind, then group
  // The fit for `kind` at the group size nearest `group` (the larger on a tie); nullptr: none.
  const CollectiveFit* collective_fit(const std::string& kind, int group) const;
  // Measured waits at a collective beyond its transfer (apps/vidax/collective_waits.h): after a
  // rank computed `compute` seconds since its previous collective, the group's last member
  // arrives `wait` seconds after the others on average (time-sliced ranks, jitter). Sorted by
  // group size, then compute (strictly increasing within a group). Empty: none.
  struct CollectiveWait {
    int group = 0;
    double compute = 0, wait = 0;  // seconds
  };
  std::vector<CollectiveWait> collective_waits;
  // The wait at a collective of `group` ranks after `compute` seconds of compute: the entries of
  // that group size (else of the nearest measured one, the larger on a tie), linear from no wait
  // at no compute up to the first entry, interpolated in log(compute) between entries, the last
  // entry's beyond it; 0 without entries or compute.
  double wait_at_collective(int group, double compute) const;
  std::string notes;

  int devices() const;
  // The fastest device 0 can send: the sum of its outgoing links' bandwidth (huge when none).
  double injection_bandwidth() const;
  int vertices() const { return vertex_count_; }
  const std::vector<Link>& links() const { return links_; }
  // The links a message from device `a` to device `b` crosses, in order (empty when a == b).
  std::vector<int> route(int a, int b) const;
  // "(x,y)" coordinates on a torus, "n<node>:<index>" on a switch fabric.
  std::string device_name(int device) const;
  int node_of(int device) const;              // switch fabrics; 0 on a torus
  std::vector<int> coords(int device) const;  // torus coordinates

  // Builds the link graph from the fields above (checked: InputError naming `source`).
  void build();

 private:
  int vertex_count_ = 0;
  std::vector<Link> links_;
  // torus: link index of (device, dim, direction +1 / -1), -1 where none
  std::vector<int> torus_link_;
  // switch: per device, its up/down links to its first hop, and the PCIe switch's to the host
  std::vector<int> up_, down_, group_up_, group_down_, nic_up_, nic_down_;
  int torus_link(int device, size_t dim, int dir) const;
};

// Parses a topology JSON text; InputError naming `source`, the field and what was expected.
Topology parse_topology(const std::string& json_text, const std::string& source);
// The file format of `t` (parse_topology gives it back): to keep a measured `local` topology.
std::string topology_to_json(const Topology& t);
std::vector<std::string> topology_preset_names();
std::optional<Topology> topology_preset(const std::string& name);
// A preset name or a JSON file path; InputError for neither (naming `flag` and the presets).
Topology load_topology(const std::string& name_or_path, const std::string& flag = "--topology");

}  // namespace vidax::plan
