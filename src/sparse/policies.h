// Factories of the learned / adaptive attention policies (Sparse VideoGen, SPADE, ScalingAttention
// WEST + FAST), one per method, each implemented in its own file. `options` is what follows the
// policy name in an `--attention` spec: "key=value" pairs separated by commas (e.g.
// "density=0.1,warmup=0.25"); WEST's starts with the prior file ("prior.west[:budget=0.05]").
// Unknown keys, malformed or out-of-range values throw InputError naming the policy, the key and
// what was expected. Defaults come from each method's paper or repository (docs/sparse-attention.md
// cites them). Thread-safety: the factories are; each policy serves one generation at a time.
#pragma once

#include <memory>
#include <string_view>

#include "sparse/attention_policy.h"

namespace vidax::sparse {

std::unique_ptr<AttentionPolicy> make_svg_policy(std::string_view options);
std::unique_ptr<AttentionPolicy> make_spade_policy(std::string_view options);
std::unique_ptr<AttentionPolicy> make_west_policy(std::string_view options);

}  // namespace vidax::sparse
