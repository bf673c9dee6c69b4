#include "sparse/policy_registry.h"

namespace vidax::sparse {

std::span<const PolicyEntry> policy_registry() {
  // svg, spade and west join here (make_svg_policy, make_spade_policy, make_west_policy).
  static const PolicyEntry kPolicies[] = {
      {"dense", "dense", &make_dense_policy},
      {"window", "window:kt,kh,kw[:tile=bt,bh,bw][:sink]", &make_window_policy},
  };
  return kPolicies;
}

}  // namespace vidax::sparse
