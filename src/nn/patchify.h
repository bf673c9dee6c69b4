// Video patch (un)folding for patch-embedding GEMMs. A latent video [C, F, H, W] with patch
// (pt, ph, pw) becomes tokens [(F/pt)*(H/ph)*(W/pw), C*pt*ph*pw] with token index
// (f*H2 + h)*W2 + w and feature order (c, pt, ph, pw) -- the order of a Conv3d weight
// [out, C, pt, ph, pw] flattened, so patch embedding is tokens x weight^T. Unpatchify takes
// [tokens, pt*ph*pw*C] with feature order (pt, ph, pw, c) back to [C, F, H, W], as Wan's head
// lays it out. Thread-safe.
#pragma once

#include <array>
#include <cstdint>

#include "core/tensor.h"

namespace vidax {

// x: F32 [C, F, H, W] (any strides); extents must be multiples of the patch. -> F32 [L, C*pv].
Tensor patchify(const Tensor& x, const std::array<int64_t, 3>& patch);

// tokens: F32 [>= L, pv*C] (rows beyond L ignored) -> F32 [C, F, H, W] for grid (F2, H2, W2).
Tensor unpatchify(const Tensor& tokens, int64_t channels, const std::array<int64_t, 3>& grid,
                  const std::array<int64_t, 3>& patch);

}  // namespace vidax
