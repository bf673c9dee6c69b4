// The per-rank schedule of work a mesh runs: compute ops (with their FLOPs and memory traffic)
// and collectives (with the mesh axis whose groups run them and the size of the argument), in
// issue order, grouped in segments that repeat (a DiT block once per layer). A model builds its
// schedule from the same declarations its runtime executes (models/wan/dit_schedule.h); the
// topology planner (plan/) prices it on a machine, and tests check it against the calls and bytes
// the process groups counted in a real run (dist/group.h CommStats). Plain values; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dist/group.h"
#include "dist/mesh.h"

namespace vidax::dist {

// The mesh axis whose groups run a collective; every group of that axis runs it at once.
// kSp is ring x ulysses (one CFG branch's sequence ranks of one tp rank).
enum class MeshAxis { kCfg, kRing, kUlysses, kTp, kSp };
const char* mesh_axis_name(MeshAxis axis);
int axis_size(const MeshSpec& mesh, MeshAxis axis);

// What bounds a compute op's time on a device: its arithmetic (kGemm, kAttention, kConv: a
// convolution, priced at the device's convolution share, models/wan/vae_schedule.h), its memory
// traffic (kMemory: norms, RoPE, residual adds, layout copies), or the packing of weights that
// arrive as checkpoint bytes (kPack: a sharded block rebuilt after its gather; `bytes` = the
// checkpoint bytes packed).
enum class OpClass { kGemm, kAttention, kConv, kMemory, kPack, kCollective };
const char* op_class_name(OpClass cls);

struct ScheduledOp {
  std::string name;  // "qkv", "self_attention", "ulysses.qkv", ...
  OpClass cls = OpClass::kGemm;
  double flops = 0;  // per call, on this rank
  // kMemory: bytes read and written per call. A collective: the size of its argument on this
  // rank as the runtime passes it: all_to_all: what goes to each peer; all_gather: this rank's
  // block; all_reduce and broadcast: the whole vector; send_recv: the message.
  double bytes = 0;
  CollectiveKind kind = CollectiveKind::kCount;  // collectives only
  MeshAxis axis = MeshAxis::kCfg;                // collectives only
  int64_t calls = 1;                             // consecutive calls of the same op
  // Runs beside the compute of its segment (a background prefetch) instead of between ops.
  bool overlapped = false;
  bool collective() const { return cls == OpClass::kCollective; }
};

struct ScheduleSegment {
  std::string name;    // "embed", "block", "head", "guidance"
  int64_t repeat = 1;  // e.g. once per DiT block
  std::vector<ScheduledOp> ops;
};

struct Schedule {
  std::vector<ScheduleSegment> segments;

  // Appends `other`'s segments `times` times (as one repeat of each).
  void append(const Schedule& other, int64_t times = 1);
  // Collective calls of `kind` on groups larger than one rank, and the bytes this rank sends for
  // them, counted as dist::Group counts them (CommStats): all_to_all (n-1)/n of its input,
  // all_gather its block times n-1, all_reduce 2 n (T-1)/T (a ring all-reduce's traffic),
  // send_recv the message, broadcast the whole vector from the root.
  int64_t calls(CollectiveKind kind, const MeshSpec& mesh) const;
  double bytes_sent(CollectiveKind kind, const MeshSpec& mesh) const;
  // Bytes this rank sends for the collectives run between ops (not `overlapped`), on `axis` only
  // when given, every kind, counted as above.
  double exposed_bytes_sent(const MeshSpec& mesh,
                            std::optional<MeshAxis> axis = std::nullopt) const;
  // FLOPs of the compute ops of `cls`; total_flops: of every class.
  double flops(OpClass cls) const;
  double total_flops() const;
  // Bytes read and written by the memory-bound ops (kMemory), calls and repeats included.
  double memory_bytes() const;
};

// Bytes one rank sends for one call of a collective whose argument is `bytes` on a group of
// `n` ranks (the convention above); 0 when n = 1.
double collective_bytes_sent(CollectiveKind kind, double bytes, int n);

}  // namespace vidax::dist
