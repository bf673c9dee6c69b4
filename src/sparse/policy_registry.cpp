#include "sparse/policy_registry.h"

#include "sparse/policies.h"

namespace vidax::sparse {

std::span<const PolicyEntry> policy_registry() {
  static const PolicyEntry kPolicies[] = {
      {"dense", "dense", &make_dense_policy},
      {"window", "window:kt,kh,kw[:tile=bt,bh,bw][:sink]", &make_window_policy},
      {"svg", "svg[:density=..,warmup=..,warmup_layers=..,samples=..,block=..,route_every=..]",
       &make_svg_policy},
      {"spade",
       "spade[:topp=..|topk=..,topp_uncond=..,topk_uncond=..,topp_early=..,topk_early=..,early=..,"
       "dense_layers=..,sink=..,shape_every=..]",
       &make_spade_policy},
      {"west", "west:FILE[:budget=..|density=..,block=TxHxW,dense_layers=..]", &make_west_policy},
  };
  return kPolicies;
}

}  // namespace vidax::sparse
