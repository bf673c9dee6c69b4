// What compute costs on a planner's device: one op of a schedule (dist/schedule.h) priced by the
// resource that bounds it, and a whole schedule's compute. Pure; thread-safe.
#pragma once

#include "dist/schedule.h"
#include "plan/topology.h"

namespace vidax::plan {

// Seconds of one call of `op`: GEMMs, attention and convolutions at the device's bf16 (or,
// `fp32`, f32) peak times their share (convolutions: that precision's conv share), memory-bound
// ops at its bandwidth times its share, packing at its pack rate; 0 for a collective (priced by
// the links).
double op_seconds(const DeviceSpec& device, const dist::ScheduledOp& op, bool fp32 = false);

// The compute of every op of `schedule` (calls and segment repeats included), collectives left
// out.
double compute_seconds(const DeviceSpec& device, const dist::Schedule& schedule, bool fp32 = false);

}  // namespace vidax::plan
