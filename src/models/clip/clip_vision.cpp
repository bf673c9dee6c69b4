#include "models/clip/clip_vision.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/flash_attention.h"
#include "kernels/cpu/gemm.h"
#include "nn/image_resize.h"
#include "nn/linear.h"

namespace vidax::clip {
namespace {

std::vector<float> vector_of(const wan::WeightFn& w, const std::string& name) {
  return w(name).to_float_vector();
}

}  // namespace

Tensor clip_preprocess(const std::vector<Tensor>& images, const ClipVisionConfig& config) {
  if (images.empty()) throw_input_error("CLIP image encoder: no image given");
  const int64_t s = config.image_size;
  Tensor out = Tensor::zeros(Shape{static_cast<int64_t>(images.size()), 3, s, s});
  float* o = out.mutable_data<float>();
  for (size_t b = 0; b < images.size(); ++b) {
    const Tensor& img = images[b];
    if (img.rank() != 3 || img.dim(0) != 3 || img.dtype() != DType::kF32)
      throw_input_error("CLIP image encoder: image ", b, " is ", img.describe(),
                        ", expected F32 [3, H, W]");
    const Tensor resized = resize_bicubic(img, s, s);  // [3, s, s]
    const float* r = resized.data<float>();
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t i = 0; i < s * s; ++i) {
        // videos.mul_(0.5).add_(0.5), then T.Normalize: (x - mean) / std, each step in f32.
        float v = r[c * s * s + i] * 0.5f;
        v = v + 0.5f;
        o[(static_cast<int64_t>(b) * 3 + c) * s * s + i] = (v - kClipMean[c]) / kClipStd[c];
      }
  }
  return out;
}

struct ClipVisionEncoder::Impl {
  ClipVisionConfig c;
  DType compute = DType::kF32;
  PackedLinear patch;  // [dim, 3 p p], no bias
  std::vector<float> cls, pos, pre_w, pre_b;
  struct Block {
    std::vector<float> n1w, n1b, n2w, n2b;
    PackedLinear qkv, proj, fc1, fc2;
  };
  std::vector<Block> blocks;

  Tensor run_linear(const PackedLinear& l, const Tensor& x) const {
    return l(compute == DType::kBF16 ? x.to(DType::kBF16) : x);
  }
};

ClipVisionEncoder::ClipVisionEncoder(const ClipVisionConfig& config, const wan::WeightFn& w,
                                     QkvStorage qkv, wan::Precision precision)
    : impl_(std::make_unique<Impl>()) {
  config.validate("CLIP vision config");
  Impl& m = *impl_;
  m.c = config;
  m.compute = precision == wan::Precision::kBF16 ? DType::kBF16 : DType::kF32;
  const int64_t p = config.patch_size;
  m.patch = PackedLinear(
      w("visual.patch_embedding.weight").contiguous().reshape(Shape{config.dim, 3 * p * p}),
      Tensor(), m.compute);
  m.cls = vector_of(w, "visual.cls_embedding");
  m.pos = vector_of(w, "visual.pos_embedding");
  m.pre_w = vector_of(w, "visual.pre_norm.weight");
  m.pre_b = vector_of(w, "visual.pre_norm.bias");
  const GemmEpilogue act =
      config.activation == Activation::kGelu ? GemmEpilogue::kGeluErf : GemmEpilogue::kNone;
  for (int64_t i = 0; i + 1 < config.num_layers; ++i) {
    const std::string pre = clip_block_prefix(i);
    Impl::Block b;
    b.n1w = vector_of(w, pre + "norm1.weight");
    b.n1b = vector_of(w, pre + "norm1.bias");
    b.n2w = vector_of(w, pre + "norm2.weight");
    b.n2b = vector_of(w, pre + "norm2.bias");
    if (qkv == QkvStorage::kFused) {
      b.qkv = PackedLinear(w(pre + "attn.to_qkv.weight"), w(pre + "attn.to_qkv.bias"), m.compute);
    } else {
      b.qkv = Linear::build(
          pre + "attn.to_qkv",
          {w(pre + "attn.to_q.weight"), w(pre + "attn.to_k.weight"), w(pre + "attn.to_v.weight")},
          {w(pre + "attn.to_q.bias"), w(pre + "attn.to_k.bias"), w(pre + "attn.to_v.bias")},
          m.compute, GemmEpilogue::kNone, LinearSplit::kReplicated, TpShard{});
    }
    b.proj = PackedLinear(w(pre + "attn.proj.weight"), w(pre + "attn.proj.bias"), m.compute);
    b.fc1 = PackedLinear(w(pre + "mlp.0.weight"), w(pre + "mlp.0.bias"), m.compute, act);
    b.fc2 = PackedLinear(w(pre + "mlp.2.weight"), w(pre + "mlp.2.bias"), m.compute);
    m.blocks.push_back(std::move(b));
  }
}

ClipVisionEncoder::~ClipVisionEncoder() = default;
ClipVisionEncoder::ClipVisionEncoder(ClipVisionEncoder&&) noexcept = default;
ClipVisionEncoder& ClipVisionEncoder::operator=(ClipVisionEncoder&&) noexcept = default;

const ClipVisionConfig& ClipVisionEncoder::config() const { return impl_->c; }

Tensor ClipVisionEncoder::forward(const Tensor& pixels, const wan::CaptureFn& capture) {
  const Impl& m = *impl_;
  const ClipVisionConfig& c = m.c;
  const int64_t s = c.image_size, p = c.patch_size, g = c.grid(), dim = c.dim;
  const int64_t tokens = c.tokens(), patches = g * g;
  if (pixels.rank() != 4 || pixels.dim(1) != 3 || pixels.dim(2) != s || pixels.dim(3) != s ||
      pixels.dim(0) < 1 || pixels.dtype() != DType::kF32)
    throw_input_error("CLIP image encoder: pixels are ", pixels.describe(),
                      ", expected F32 [B, 3, ", s, ", ", s, "]");
  const int64_t batch = pixels.dim(0);
  const Tensor px = pixels.contiguous();
  const float* in = px.data<float>();

  // Patch embedding as a GEMM: row (b, gy, gx), column (channel, ky, kx) = the conv's layout.
  const int64_t kdim = 3 * p * p;
  Tensor cols = Tensor::zeros(Shape{batch * patches, kdim});
  float* colp = cols.mutable_data<float>();
#pragma omp parallel for collapse(2)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t gy = 0; gy < g; ++gy)
      for (int64_t gx = 0; gx < g; ++gx) {
        float* row = colp + ((b * g + gy) * g + gx) * kdim;
        for (int64_t ch = 0; ch < 3; ++ch)
          for (int64_t ky = 0; ky < p; ++ky)
            for (int64_t kx = 0; kx < p; ++kx)
              row[(ch * p + ky) * p + kx] = in[((b * 3 + ch) * s + gy * p + ky) * s + gx * p + kx];
      }
  const Tensor emb = m.run_linear(m.patch, cols);  // [B * patches, dim]

  // x: [B * tokens, dim] = [CLS; patches] + position table, then the pre-norm.
  Tensor x = Tensor::zeros(Shape{batch * tokens, dim});
  float* xp = x.mutable_data<float>();
  const float* ep = emb.data<float>();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < tokens; ++t) {
      float* row = xp + (b * tokens + t) * dim;
      const float* src = t == 0 ? m.cls.data() : ep + (b * patches + t - 1) * dim;
      const float* pos = m.pos.data() + t * dim;
      for (int64_t k = 0; k < dim; ++k) row[k] = src[k] + pos[k];
    }
  const auto eps = static_cast<float>(c.eps);
  layer_norm_rows(xp, xp, batch * tokens, dim, m.pre_w.data(), m.pre_b.data(), eps);
  if (capture) capture("embed", x.reshape(Shape{batch, tokens, dim}));

  Tensor h = Tensor::zeros(Shape{batch * tokens, dim});
  Tensor att = Tensor::zeros(Shape{batch * tokens, dim});
  float* hp = h.mutable_data<float>();
  AttentionDims d{};
  d.q_len = d.kv_len = d.kv_valid = tokens;
  d.heads = c.num_heads;
  d.head_dim = c.head_dim();
  d.q_stride = d.k_stride = d.v_stride = 3 * dim;
  d.out_stride = dim;
  d.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim()));
  for (size_t i = 0; i < m.blocks.size(); ++i) {
    const Impl::Block& blk = m.blocks[i];
    layer_norm_rows(xp, hp, batch * tokens, dim, blk.n1w.data(), blk.n1b.data(), eps);
    const Tensor qkv = m.run_linear(blk.qkv, h);  // [B * tokens, 3 dim]: q | k | v, heads inside
    const Tensor qkv_in = m.compute == DType::kBF16 ? qkv.to(DType::kBF16) : qkv;
    for (int64_t b = 0; b < batch; ++b) {
      float* out = att.mutable_data<float>() + b * tokens * dim;
      if (m.compute == DType::kBF16) {
        const BFloat16* base = qkv_in.data<BFloat16>() + b * tokens * 3 * dim;
        flash_attention(base, base + dim, base + 2 * dim, out, d);
      } else {
        const float* base = qkv_in.data<float>() + b * tokens * 3 * dim;
        flash_attention(base, base + dim, base + 2 * dim, out, d);
      }
    }
    add_rows(xp, m.run_linear(blk.proj, att).data<float>(), batch * tokens * dim);
    layer_norm_rows(xp, hp, batch * tokens, dim, blk.n2w.data(), blk.n2b.data(), eps);
    Tensor mid = m.run_linear(blk.fc1, h);  // [B * tokens, ffn], GELU applied (exact erf)
    if (c.activation == Activation::kQuickGelu) {
      float* mp = mid.mutable_data<float>();
      const int64_t n = mid.numel();
#pragma omp parallel for
      for (int64_t k = 0; k < n; ++k) mp[k] = mp[k] / (1.0f + std::exp(-1.702f * mp[k]));
    }
    add_rows(xp, m.run_linear(blk.fc2, mid).data<float>(), batch * tokens * dim);
    if (capture) capture("block" + std::to_string(i), x.reshape(Shape{batch, tokens, dim}));
  }
  return x.reshape(Shape{batch, tokens, dim});
}

Tensor ClipVisionEncoder::encode(const std::vector<Tensor>& images, const wan::CaptureFn& capture) {
  const Tensor pixels = clip_preprocess(images, impl_->c);
  if (capture) capture("pixels", pixels);
  return forward(pixels, capture);
}

int64_t ClipVisionEncoder::weight_bytes(const ClipVisionConfig& c, wan::Precision precision) {
  const int64_t item = precision == wan::Precision::kBF16 ? 2 : 4;
  return clip_vision_parameter_count(c) * item;
}

int64_t ClipVisionEncoder::activation_bytes(const ClipVisionConfig& c, int64_t batch) {
  const int64_t rows = batch * c.tokens();
  return 4 * rows * (c.dim * 8 + c.ffn_dim * 2) + 4 * batch * 3 * c.image_size * c.image_size * 2;
}

}  // namespace vidax::clip
