#include "plan/compute_cost.h"

namespace vidax::plan {

using dist::OpClass;

double op_seconds(const DeviceSpec& d, const dist::ScheduledOp& op, bool fp32) {
  switch (op.cls) {
    case OpClass::kGemm:
      return op.flops / (d.peak_flops(fp32) * d.gemm_efficiency);
    case OpClass::kAttention:
      return op.flops / (d.peak_flops(fp32) * d.attention_efficiency);
    case OpClass::kConv:
      return op.flops / (d.peak_flops(fp32) * d.conv_share(fp32));
    case OpClass::kMemory:
      return op.bytes / (d.memory_bandwidth * d.memory_efficiency);
    case OpClass::kPack:
      return d.pack_bandwidth > 0 ? op.bytes / d.pack_bandwidth : 0.0;
    case OpClass::kCollective:
      return 0;
  }
  return 0;
}

double compute_seconds(const DeviceSpec& d, const dist::Schedule& s, bool fp32) {
  double total = 0;
  for (const auto& seg : s.segments) {
    double t = 0;
    for (const auto& op : seg.ops) t += op_seconds(d, op, fp32) * static_cast<double>(op.calls);
    total += t * static_cast<double>(seg.repeat);
  }
  return total;
}

}  // namespace vidax::plan
