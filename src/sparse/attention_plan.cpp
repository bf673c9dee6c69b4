#include "sparse/attention_policy.h"

namespace vidax::sparse {

bool AttentionPlan::all_dense() const {
  for (const auto& g : groups)
    if (!g.dense) return false;
  return true;
}

}  // namespace vidax::sparse
