#include "dist/schedule.h"

#include <cmath>

#include "core/error.h"

namespace vidax::dist {

const char* mesh_axis_name(MeshAxis axis) {
  switch (axis) {
    case MeshAxis::kCfg:
      return "cfg";
    case MeshAxis::kRing:
      return "ring";
    case MeshAxis::kUlysses:
      return "ulysses";
    case MeshAxis::kTp:
      return "tp";
    case MeshAxis::kSp:
      return "sp";
  }
  return "?";
}

int axis_size(const MeshSpec& mesh, MeshAxis axis) {
  switch (axis) {
    case MeshAxis::kCfg:
      return mesh.cfg;
    case MeshAxis::kRing:
      return mesh.ring;
    case MeshAxis::kUlysses:
      return mesh.ulysses;
    case MeshAxis::kTp:
      return mesh.tp;
    case MeshAxis::kSp:
      return mesh.sp();
  }
  return 1;
}

const char* op_class_name(OpClass cls) {
  switch (cls) {
    case OpClass::kGemm:
      return "gemm";
    case OpClass::kAttention:
      return "attention";
    case OpClass::kConv:
      return "conv";
    case OpClass::kMemory:
      return "memory";
    case OpClass::kPack:
      return "pack";
    case OpClass::kCollective:
      return "collective";
  }
  return "?";
}

double collective_bytes_sent(CollectiveKind kind, double bytes, int n) {
  if (n <= 1) return 0;
  switch (kind) {
    case CollectiveKind::kAllToAll:       // `bytes` to each peer
    case CollectiveKind::kAllGather:      // this rank's block to each peer
    case CollectiveKind::kReduceScatter:  // each peer's block
      return bytes * (n - 1);
    case CollectiveKind::kAllReduce:
      // dist::Group counts 2 n (T-1) / T in integer bytes (rounded down).
      return std::floor(2 * bytes * (n - 1) / n);
    case CollectiveKind::kSendRecv:
    case CollectiveKind::kBroadcast:
      return bytes;
    case CollectiveKind::kBarrier:
    case CollectiveKind::kCount:
      return 0;
  }
  return 0;
}

void Schedule::append(const Schedule& other, int64_t times) {
  for (int64_t i = 0; i < times; ++i)
    segments.insert(segments.end(), other.segments.begin(), other.segments.end());
}

int64_t Schedule::calls(CollectiveKind kind, const MeshSpec& mesh) const {
  int64_t n = 0;
  for (const auto& s : segments)
    for (const auto& op : s.ops)
      if (op.collective() && op.kind == kind && axis_size(mesh, op.axis) > 1)
        n += s.repeat * op.calls;
  return n;
}

double Schedule::bytes_sent(CollectiveKind kind, const MeshSpec& mesh) const {
  double b = 0;
  for (const auto& s : segments)
    for (const auto& op : s.ops)
      if (op.collective() && op.kind == kind)
        b += static_cast<double>(s.repeat * op.calls) *
             collective_bytes_sent(kind, op.bytes, axis_size(mesh, op.axis));
  return b;
}

double Schedule::exposed_bytes_sent(const MeshSpec& mesh, std::optional<MeshAxis> axis) const {
  double b = 0;
  for (const auto& s : segments)
    for (const auto& op : s.ops)
      if (op.collective() && !op.overlapped && (!axis || op.axis == *axis))
        b += static_cast<double>(s.repeat * op.calls) *
             collective_bytes_sent(op.kind, op.bytes, axis_size(mesh, op.axis));
  return b;
}

double Schedule::flops(OpClass cls) const {
  double f = 0;
  for (const auto& s : segments)
    for (const auto& op : s.ops)
      if (op.cls == cls) f += static_cast<double>(s.repeat * op.calls) * op.flops;
  return f;
}

double Schedule::memory_bytes() const {
  double b = 0;
  for (const auto& s : segments)
    for (const auto& op : s.ops)
      if (op.cls == OpClass::kMemory) b += static_cast<double>(s.repeat * op.calls) * op.bytes;
  return b;
}

double Schedule::total_flops() const {
  return flops(OpClass::kGemm) + flops(OpClass::kAttention) + flops(OpClass::kConv) +
         flops(OpClass::kMemory);
}

}  // namespace vidax::dist
