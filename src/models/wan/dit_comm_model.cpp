#include "models/wan/dit_comm_model.h"

namespace vidax::wan {

DitCommBytes dit_comm_bytes(const DitConfig& c, int64_t tokens, const dist::MeshSpec& mesh,
                            Precision precision, int64_t latent_numel, int64_t context_tokens) {
  DitCommBytes b;
  const double act = precision == Precision::kBF16 ? 2.0 : 4.0;
  const double U = mesh.ulysses, R = mesh.ring, sp = mesh.sp();
  const double lr = static_cast<double>((tokens + mesh.sp() - 1) / mesh.sp());  // rows per rank
  const double layers = static_cast<double>(c.num_layers);
  const double dim = static_cast<double>(c.dim) / mesh.tp;  // this rank's heads' channels
  // q, k, v in and the output back: 4 * lr * dim elements, (U - 1) / U of them leave the rank.
  if (mesh.ulysses > 1) b.ulysses = layers * 4.0 * lr * dim * (U - 1) / U * act;
  // The ring shard's keys and values (U * lr rows of dim / U channels each) pass R - 1 times.
  if (mesh.ring > 1) b.ring = layers * 2.0 * lr * dim * (R - 1) * act;
  const double out_features = static_cast<double>(c.out_dim * c.patch_volume());
  if (mesh.sp() > 1) b.sp_gather = lr * out_features * 4.0 * (sp - 1);
  if (mesh.cfg > 1) b.cfg_gather = static_cast<double>(latent_numel) * 4.0 * (mesh.cfg - 1);
  if (mesh.tp > 1) {
    const int64_t T = mesh.tp, rows = (tokens + mesh.sp() - 1) / mesh.sp();
    auto all_reduce = [&](int64_t floats) {
      return static_cast<double>(2 * floats * 4 * (T - 1) / T);
    };
    const int norms = c.qk_norm ? 1 : 0;
    // o, cross-o, FFN-out; norm statistics of q, k and cross-q.
    b.tp_reduce = layers * (3 * all_reduce(rows * c.dim) + 3 * norms * all_reduce(rows));
    const int64_t n = context_tokens > 0 ? context_tokens : c.text_len;
    const int64_t ctx_rows = n < c.text_len ? n + 1 : n;  // the padding rows as one
    b.tp_context = layers * norms * all_reduce(ctx_rows);
    if (c.image_branch()) b.tp_context += layers * norms * all_reduce(257);
  }
  return b;
}

}  // namespace vidax::wan
