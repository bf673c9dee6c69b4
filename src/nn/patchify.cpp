#include "nn/patchify.h"

namespace vidax {

Tensor patchify(const Tensor& x_in, const std::array<int64_t, 3>& p) {
  VIDAX_CHECK(x_in.rank() == 4, "patchify expects [C, F, H, W], got ", x_in.describe());
  const Tensor x = x_in.dtype() == DType::kF32 ? x_in.contiguous() : x_in.to(DType::kF32);
  const int64_t c = x.dim(0), f = x.dim(1), h = x.dim(2), w = x.dim(3);
  VIDAX_CHECK(f % p[0] == 0 && h % p[1] == 0 && w % p[2] == 0, "patchify: ", x.describe(),
              " not divisible by patch");
  const int64_t f2 = f / p[0], h2 = h / p[1], w2 = w / p[2];
  const int64_t k = c * p[0] * p[1] * p[2];
  Tensor out = Tensor::zeros(Shape{f2 * h2 * w2, k});  // [L, C*pt*ph*pw]
  const float* src = x.data<float>();
  float* dst = out.mutable_data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t tok = 0; tok < f2 * h2 * w2; ++tok) {
    const int64_t fi = tok / (h2 * w2), hi = (tok / w2) % h2, wi = tok % w2;
    float* row = dst + tok * k;
    int64_t j = 0;
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t a = 0; a < p[0]; ++a)
        for (int64_t b = 0; b < p[1]; ++b)
          for (int64_t d = 0; d < p[2]; ++d)
            row[j++] = src[((ci * f + fi * p[0] + a) * h + hi * p[1] + b) * w + wi * p[2] + d];
  }
  return out;
}

Tensor unpatchify(const Tensor& tokens_in, int64_t c, const std::array<int64_t, 3>& g,
                  const std::array<int64_t, 3>& p) {
  const Tensor tokens = tokens_in.contiguous();
  const int64_t pv = p[0] * p[1] * p[2];
  const int64_t n = g[0] * g[1] * g[2];
  VIDAX_CHECK(tokens.rank() == 2 && tokens.dim(0) >= n && tokens.dim(1) == pv * c,
              "unpatchify: ", tokens.describe());
  const int64_t f = g[0] * p[0], h = g[1] * p[1], w = g[2] * p[2];
  Tensor out = Tensor::zeros(Shape{c, f, h, w});
  const float* src = tokens.data<float>();
  float* dst = out.mutable_data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t tok = 0; tok < n; ++tok) {
    const int64_t fi = tok / (g[1] * g[2]), hi = (tok / g[2]) % g[1], wi = tok % g[2];
    const float* row = src + tok * pv * c;
    int64_t j = 0;
    for (int64_t a = 0; a < p[0]; ++a)
      for (int64_t b = 0; b < p[1]; ++b)
        for (int64_t d = 0; d < p[2]; ++d)
          for (int64_t ci = 0; ci < c; ++ci)
            dst[((ci * f + fi * p[0] + a) * h + hi * p[1] + b) * w + wi * p[2] + d] = row[j++];
  }
  return out;
}

}  // namespace vidax
