#include "models/wan/dit_comm_model.h"

#include "models/wan/dit_schedule.h"

namespace vidax::wan {

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
  b.ulysses = forward.exposed_bytes_sent(mesh, dist::MeshAxis::kUlysses);
  b.ring = forward.exposed_bytes_sent(mesh, dist::MeshAxis::kRing);
  b.sp_gather = forward.exposed_bytes_sent(mesh, dist::MeshAxis::kSp);
  b.tp_reduce = forward.exposed_bytes_sent(mesh, dist::MeshAxis::kTp);
  b.tp_context = first.exposed_bytes_sent(mesh, dist::MeshAxis::kTp) - b.tp_reduce;
  if (mesh.cfg > 1) {
    const dist::Schedule step = dit_step_schedule(c, req, mesh);
    b.cfg_gather = step.exposed_bytes_sent(mesh, dist::MeshAxis::kCfg);
  }
  return b;
}

}  // namespace vidax::wan
