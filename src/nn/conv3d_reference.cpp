// Scalar reference for Conv3d: a direct six-fold loop with double accumulation.
#include <vector>

#include "nn/conv3d.h"

namespace vidax {

Tensor conv3d_reference(const Tensor& src_in, const Tensor& weight_in, const Tensor& bias_in,
                        const Conv3dParams& p) {
  const Tensor src = src_in.to(DType::kF32);
  const Tensor weight = weight_in.to(DType::kF32);
  VIDAX_CHECK(src.rank() == 4, "conv3d_reference src must be [T, H, W, C], got ", src.describe());
  const int64_t cout = weight.dim(0), cin = weight.dim(1);
  const int64_t kt = weight.rank() == 5 ? weight.dim(2) : 1;
  const int64_t kh = weight.dim(weight.rank() - 2), kw = weight.dim(weight.rank() - 1);
  const int64_t t = src.dim(0), h = src.dim(1), w = src.dim(2);
  VIDAX_CHECK(src.dim(3) == cin, "conv3d_reference channels");
  const int64_t to = (t - kt) / p.stride[0] + 1;
  const int64_t ho = (h + p.pad_top + p.pad_bottom - kh) / p.stride[1] + 1;
  const int64_t wo = (w + p.pad_left + p.pad_right - kw) / p.stride[2] + 1;
  Tensor out = Tensor::zeros(Shape{to, ho, wo, cout});
  const float* x = src.data<float>();
  const float* wt = weight.data<float>();
  std::vector<float> b(static_cast<size_t>(cout), 0.0f);
  if (bias_in.defined()) b = bias_in.to_float_vector();
  float* y = out.mutable_data<float>();
  for (int64_t ot = 0; ot < to; ++ot)
    for (int64_t oh = 0; oh < ho; ++oh)
      for (int64_t ow = 0; ow < wo; ++ow)
        for (int64_t co = 0; co < cout; ++co) {
          double acc = b[static_cast<size_t>(co)];
          for (int64_t a = 0; a < kt; ++a) {
            const int64_t it = ot * p.stride[0] + a;
            for (int64_t bh = 0; bh < kh; ++bh) {
              const int64_t ih = oh * p.stride[1] + bh - p.pad_top;
              if (ih < 0 || ih >= h) continue;
              for (int64_t bw = 0; bw < kw; ++bw) {
                const int64_t iw = ow * p.stride[2] + bw - p.pad_left;
                if (iw < 0 || iw >= w) continue;
                const float* xp = x + ((it * h + ih) * w + iw) * cin;
                for (int64_t ci = 0; ci < cin; ++ci)
                  acc += static_cast<double>(xp[ci]) *
                         wt[(((co * cin + ci) * kt + a) * kh + bh) * kw + bw];
              }
            }
          }
          y[((ot * ho + oh) * wo + ow) * cout + co] = static_cast<float>(acc);
        }
  return out;
}

}  // namespace vidax
