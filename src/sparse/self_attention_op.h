// The DiT's self-attention core as one op: given post-RoPE q, k, v of complete rows (one process,
// or a rank's heads after the Ulysses exchange), a policy's plan run by the block-sparse
// executor, or dense flash attention when there is no policy or its plan is all dense (and no
// diagnostics are asked for). WanDit runs it for every block; `vidax bench attention` times its
// plan() and execute() on their own, so the benchmark measures the code the model runs.
//
// Thread-safety: one op per model; not reentrant (its workspace is reused from call to call).
#pragma once

#include <memory>

#include "sparse/attention_policy.h"
#include "sparse/sparse_attention.h"

namespace vidax::sparse {

class SelfAttentionOp {
 public:
  // Null policy: dense. `diagnostics` (optional) records each call's error and recall against
  // dense; both must outlive the calls.
  void set_policy(std::shared_ptr<AttentionPolicy> policy,
                  AttentionDiagnostics* diagnostics = nullptr);
  bool has_policy() const { return policy_ != nullptr; }

  // The policy's plan for `call` (only with a policy).
  AttentionPlan plan(const AttentionCall& call);
  // Runs `plan` (null: dense flash attention on io's kernel inputs: q16/k16/v16 when io.bf16,
  // else q/k/v) into io.out.
  void execute(const AttentionPlan* plan, const AttentionCall& call, const AttentionIo& io);
  // plan() then execute(), taking the dense kernel when the plan is all dense and nothing is
  // diagnosed: what the model does every call.
  void run(const AttentionCall& call, const AttentionIo& io);

 private:
  std::shared_ptr<AttentionPolicy> policy_;
  AttentionDiagnostics* diagnostics_ = nullptr;
  AttentionWorkspace ws_;
};

}  // namespace vidax::sparse
