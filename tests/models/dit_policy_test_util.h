// Shared setup of the DiT attention-policy tests: a 2-head DiT small enough for scalar checks and
// one sample on a ragged 3 x 5 x 7 token grid.
#pragma once

#include <vector>

#include "models/wan/dit.h"
#include "support/test_support.h"

namespace vidax::wan::testing {

inline DitConfig small_policy_config() {
  DitConfig c;
  c.dim = 128, c.num_heads = 2, c.ffn_dim = 128, c.num_layers = 2, c.text_len = 8;
  c.text_dim = 16, c.freq_dim = 16;
  return c;
}

// Step 4 of 10, `cfg_branch` as given.
inline DitSample small_policy_sample(int cfg_branch) {
  DitSample s;
  s.x = vidax::testing::random_tensor(Shape{16, 3, 10, 14}, 1);  // grid 3 x 5 x 7 = 105 tokens
  s.context = vidax::testing::random_tensor(Shape{3, 16}, 2);
  s.t = Tensor::from_floats(std::vector<float>{700.0f}, Shape{1});
  s.step = 4;
  s.steps = 10;
  s.cfg_branch = cfg_branch;
  return s;
}

}  // namespace vidax::wan::testing
