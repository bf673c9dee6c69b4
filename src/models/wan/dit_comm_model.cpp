#include "models/wan/dit_comm_model.h"

#include "models/wan/dit_schedule.h"

namespace vidax::wan {
namespace {

// Bytes this rank sends for the collectives of `s` on `axis` (every kind).
double sent_on(const dist::Schedule& s, dist::MeshAxis axis, const dist::MeshSpec& mesh) {
  double b = 0;
  for (const auto& seg : s.segments)
    for (const auto& op : seg.ops)
      if (op.collective() && op.axis == axis && !op.overlapped)
        b += static_cast<double>(seg.repeat * op.calls) *
             dist::collective_bytes_sent(op.kind, op.bytes, dist::axis_size(mesh, op.axis));
  return b;
}

}  // namespace

DitCommBytes dit_comm_bytes(const DitConfig& c, int64_t tokens, const dist::MeshSpec& mesh,
                            Precision precision, int64_t latent_numel, int64_t context_tokens) {
  DitScheduleRequest req;
  req.tokens = tokens;
  req.context_tokens = context_tokens;
  req.latent_numel = latent_numel;
  req.precision = precision;
  const dist::Schedule forward = dit_forward_schedule(c, req, mesh);
  const dist::Schedule first = dit_forward_schedule(c, req, mesh, /*new_context=*/true);
  DitCommBytes b;
  b.ulysses = sent_on(forward, dist::MeshAxis::kUlysses, mesh);
  b.ring = sent_on(forward, dist::MeshAxis::kRing, mesh);
  b.sp_gather = sent_on(forward, dist::MeshAxis::kSp, mesh);
  b.tp_reduce = sent_on(forward, dist::MeshAxis::kTp, mesh);
  b.tp_context = sent_on(first, dist::MeshAxis::kTp, mesh) - b.tp_reduce;
  if (mesh.cfg > 1) {
    const dist::Schedule step = dit_step_schedule(c, req, mesh);
    b.cfg_gather = sent_on(step, dist::MeshAxis::kCfg, mesh);
  }
  return b;
}

}  // namespace vidax::wan
