#include "sparse/self_attention_op.h"

#include "core/error.h"
#include "core/profile.h"
#include "kernels/cpu/flash_attention.h"

namespace vidax::sparse {

void SelfAttentionOp::set_policy(std::shared_ptr<AttentionPolicy> policy,
                                 AttentionDiagnostics* diagnostics) {
  policy_ = std::move(policy);
  diagnostics_ = diagnostics;
}

AttentionPlan SelfAttentionOp::plan(const AttentionCall& call) {
  VIDAX_CHECK(policy_ != nullptr, "SelfAttentionOp::plan without a policy");
  profile::ScopedTimer pt("attention.plan");
  return policy_->plan(call);
}

void SelfAttentionOp::execute(const AttentionPlan* plan, const AttentionCall& call,
                              const AttentionIo& io) {
  profile::ScopedTimer pt("attention.self");
  if (plan != nullptr) {
    execute_attention_plan(*plan, io, ws_, call, diagnostics_);
    return;
  }
  AttentionDims d{};
  d.heads = io.heads;
  d.head_dim = io.head_dim;
  d.scale = io.scale;
  d.q_len = d.kv_len = d.kv_valid = io.tokens;
  d.q_stride = d.k_stride = d.v_stride = io.stride;
  d.out_stride = io.out_stride;
  if (io.bf16) {
    flash_attention(io.q16, io.k16, io.v16, io.out, d);
  } else {
    flash_attention(io.q, io.k, io.v, io.out, d);
  }
}

void SelfAttentionOp::run(const AttentionCall& call, const AttentionIo& io) {
  if (policy_ == nullptr) {
    execute(nullptr, call, io);
    return;
  }
  const AttentionPlan p = plan(call);
  const bool sparse_path = !p.all_dense() || diagnostics_ != nullptr;
  execute(sparse_path ? &p : nullptr, call, io);
}

}  // namespace vidax::sparse
