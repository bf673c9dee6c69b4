#include "models/wan/dit.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include <omp.h>
#include <unistd.h>

#include "core/byte_size.h"
#include "core/convert.h"
#include "core/prefetch_stream.h"
#include "dist/group.h"
#include "dist/mesh.h"
#include "kernels/cpu/elementwise.h"
#include "models/wan/dit_impl.h"
#include "nn/patchify.h"
#include "nn/timestep_embedding.h"

namespace vidax::wan {
namespace {

std::vector<float> vec(const WeightFn& w, const std::string& name) {
  return w(name).to_float_vector();
}

// The first n values of t as doubles (int64 timesteps as the model sees them, or floats).
std::vector<double> read_values(const Tensor& t_in, int64_t n) {
  const Tensor t = t_in.contiguous();
  std::vector<double> v(static_cast<size_t>(n));
  if (is_float(t.dtype())) {
    const std::vector<float> f = t.to_float_vector();
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = f[static_cast<size_t>(i)];
    return v;
  }
  for (int64_t i = 0; i < n; ++i) {
    v[static_cast<size_t>(i)] = t.dtype() == DType::kI64
                                    ? static_cast<double>(t.data<int64_t>()[i])
                                    : static_cast<double>(t.data<int32_t>()[i]);
  }
  return v;
}

void require_float(const Tensor& t, const char* name) {
  if (t.defined() && !is_float(t.dtype()))
    throw_input_error(name, ": expected a float tensor (F32/BF16/F16), got ", t.describe());
}

}  // namespace

Precision parse_precision(const std::string& text, const std::string& flag) {
  if (text == "fp32" || text == "f32") return Precision::kFP32;
  if (text == "bf16") return Precision::kBF16;
  throw_input_error(flag, ": unknown precision '", text, "' (expected fp32 or bf16)");
}

// Block `i`'s weights, this rank's tensor-parallel share (nn/linear.h).
std::unique_ptr<DitBlockWeights> WanDit::Impl::load_block(const WeightFn& w, int64_t i,
                                                          bool presliced) const {
  const DitConfig& config = cfg;
  const DType cd = compute;
  const int64_t dim = config.dim;
  auto out = std::make_unique<DitBlockWeights>();
  DitBlockWeights& bw = *out;
  const std::string b = "blocks." + std::to_string(i) + ".";
  auto W = [&](const std::string& n) { return w(b + n + ".weight"); };
  auto B = [&](const std::string& n) { return w(b + n + ".bias"); };
  // This rank's share of a linear: `parts` fused along the output features.
  auto linear = [&](const std::string& name, const std::vector<std::string>& parts,
                    LinearSplit split, GemmEpilogue epilogue = GemmEpilogue::kNone) {
    std::vector<Tensor> ws, bs;
    std::vector<float> fp8_scales;
    if (fp8_fn) {  // kept as stored when every part is stored kept, in one dtype
      for (const auto& p : parts) {
        std::optional<Fp8Tensor> f = fp8_fn(b + p + ".weight");
        if (!f || (!ws.empty() && f->codes.dtype() != ws.front().dtype())) break;
        ws.push_back(f->codes);
        fp8_scales.push_back(f->scale);
      }
      if (fp8_scales.size() != parts.size()) ws.clear(), fp8_scales.clear();
    }
    for (const auto& p : parts) {
      if (fp8_scales.empty()) ws.push_back(W(p));
      bs.push_back(B(p));
    }
    return Linear::build(b + name, ws, bs, cd, epilogue, split, tp, fp8_scales, presliced);
  };
  const TpShard norm_tp = presliced ? TpShard{} : tp;  // norm weights: sliced here or already
  constexpr LinearSplit kCol = LinearSplit::kColumn, kRow = LinearSplit::kRow;
  bw.qkv = linear("self_attn.qkv", {"self_attn.q", "self_attn.k", "self_attn.v"}, kCol);
  bw.o = linear("self_attn.o", {"self_attn.o"}, kRow);
  bw.cross_q = linear("cross_attn.q", {"cross_attn.q"}, kCol);
  bw.cross_kv = linear("cross_attn.kv", {"cross_attn.k", "cross_attn.v"}, kCol);
  bw.cross_o = linear("cross_attn.o", {"cross_attn.o"}, kRow);
  // Wan's q/k RMSNorm spans all heads: each rank keeps the weights of its own heads.
  if (config.qk_norm) {
    bw.norm_q = shard_vector(vec(w, b + "self_attn.norm_q.weight"), norm_tp);
    bw.norm_k = shard_vector(vec(w, b + "self_attn.norm_k.weight"), norm_tp);
    bw.cross_norm_q = shard_vector(vec(w, b + "cross_attn.norm_q.weight"), norm_tp);
    bw.cross_norm_k = shard_vector(vec(w, b + "cross_attn.norm_k.weight"), norm_tp);
  }
  if (config.image_branch()) {
    bw.cross_kv_img = linear("cross_attn.kv_img", {"cross_attn.k_img", "cross_attn.v_img"}, kCol);
    if (config.qk_norm)
      bw.cross_norm_k_img = shard_vector(vec(w, b + "cross_attn.norm_k_img.weight"), norm_tp);
  }
  if (config.cross_attn_norm) {
    bw.norm3_weight = vec(w, b + "norm3.weight");
    bw.norm3_bias = vec(w, b + "norm3.bias");
  }
  bw.ffn_in = linear("ffn.0", {"ffn.0"}, kCol, GemmEpilogue::kGeluTanh);
  bw.ffn_out = linear("ffn.2", {"ffn.2"}, kRow);
  bw.modulation = vec(w, b + "modulation");
  if (static_cast<int64_t>(bw.modulation.size()) != 6 * dim)
    throw_input_error(b, "modulation: expected ", 6 * dim, " values, got ", bw.modulation.size());
  return out;
}

size_t DitBlockWeights::bytes() const {
  size_t n = 0;
  for (const Linear* l :
       {&qkv, &o, &cross_q, &cross_kv, &cross_o, &cross_kv_img, &ffn_in, &ffn_out})
    n += l->defined() ? l->packed_bytes() : 0;
  for (const auto* v : {&norm_q, &norm_k, &cross_norm_q, &cross_norm_k, &cross_norm_k_img,
                        &norm3_weight, &norm3_bias, &modulation})
    n += v->size() * sizeof(float);
  return n;
}

double WanDit::block_weight_bytes(const DitConfig& c, Precision precision, int tp,
                                  int kept_item_bytes) {
  const double d = static_cast<double>(c.dim), f = static_cast<double>(c.ffn_dim);
  double matrices = 8 * d * d + 2 * d * f;  // q, k, v, o, cross q, k, v, o; FFN in and out
  if (c.image_branch()) matrices += 2 * d * d;
  const double item = kept_item_bytes > 0
                          ? static_cast<double>(kept_item_bytes)
                          : static_cast<double>(gemm_weight_item_bytes(
                                precision == Precision::kBF16 ? DType::kBF16 : DType::kF32));
  // f32 vectors (an upper bound: not divided by tp): the biases (9 of width dim, FFN-in's of
  // ffn_dim, i2v's k_img|v_img), the q/k norms, norm3's weight and bias, the modulation.
  double vectors = 9 * d + f + 4 * d + 2 * d + 6 * d;
  if (c.image_branch()) vectors += 3 * d;
  return matrices / tp * item + vectors * 4;
}

WanDit::WanDit(const DitConfig& config, const WeightFn& w, Precision precision,
               const ExecContext& ctx, const WeightResidency& residency)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.cfg = config;
  m.ctx = ctx;
  if (ctx.mesh != nullptr) m.tp = {ctx.mesh->tp().rank(), ctx.mesh->tp().size()};
  if (config.num_heads % m.tp.size != 0)
    throw_input_error("tp=", m.tp.size, " does not divide the model's ", config.num_heads,
                      " attention heads");
  m.precision = precision;
  m.compute = precision == Precision::kBF16 ? DType::kBF16 : DType::kF32;
  const DType cd = m.compute;
  const int64_t dim = config.dim;

  const Tensor pw = w("patch_embedding.weight");
  m.patch_embedding = PackedLinear(pw.contiguous().reshape(Shape{dim, pw.numel() / dim}),
                                   w("patch_embedding.bias"), cd);
  m.text0 = PackedLinear(w("text_embedding.0.weight"), w("text_embedding.0.bias"), cd,
                         GemmEpilogue::kGeluTanh);
  m.text2 = PackedLinear(w("text_embedding.2.weight"), w("text_embedding.2.bias"), cd);
  m.time0 = PackedLinear(w("time_embedding.0.weight"), w("time_embedding.0.bias"), DType::kF32);
  m.time2 = PackedLinear(w("time_embedding.2.weight"), w("time_embedding.2.bias"), DType::kF32);
  m.time_projection =
      PackedLinear(w("time_projection.1.weight"), w("time_projection.1.bias"), DType::kF32);

  m.head = PackedLinear(w("head.head.weight"), w("head.head.bias"), cd);
  m.head_modulation = vec(w, "head.modulation");
  if (config.image_branch()) {
    m.img_ln0_w = vec(w, "img_emb.proj.0.weight");
    m.img_ln0_b = vec(w, "img_emb.proj.0.bias");
    m.img1 = PackedLinear(w("img_emb.proj.1.weight"), w("img_emb.proj.1.bias"), cd,
                          GemmEpilogue::kGeluErf);
    m.img3 = PackedLinear(w("img_emb.proj.3.weight"), w("img_emb.proj.3.bias"), cd);
    m.img_ln4_w = vec(w, "img_emb.proj.4.weight");
    m.img_ln4_b = vec(w, "img_emb.proj.4.bias");
    if (config.flf_pos_tokens > 0) m.img_emb_pos = vec(w, "img_emb.emb_pos");
  }
  m.rope = Rope3dTable::build(config.head_dim());

  // The blocks: all loaded now, or (with a budget) the first ones kept and the rest streamed
  // through a window of two (the one in use and the next, loaded meanwhile), or one when only
  // one fits.
  const int n = static_cast<int>(config.num_layers);
  // Weights kept as stored only where the checkpoint stores fp8 (or fp16 with fp32 compute): a
  // block's FFN weight says which.
  m.fp8_fn = residency.fp8;
  int kept_item = 0;
  if (config.num_layers > 0 && residency.fp8) {
    const std::optional<Fp8Tensor> probe = residency.fp8("blocks.0.ffn.0.weight");
    if (probe) kept_item = static_cast<int>(dtype_size(probe->codes.dtype()));
    if (probe && probe->codes.dtype() == DType::kF16 && precision != Precision::kFP32)
      throw_input_error(
          "fp16 weights are kept for fp32 compute only (bf16 holds them at the "
          "same size)");
  }
  int pinned = n, window = 0;
  if (residency.budget_bytes > 0) {
    const double stem = static_cast<double>(m.stem_bytes());
    const double block = block_weight_bytes(config, precision, m.tp.size, kept_item);
    const double room = static_cast<double>(residency.budget_bytes) - stem;
    const auto fit = static_cast<int64_t>(std::max(0.0, std::floor(room / block)));
    if (fit < 1)
      throw_input_error("weights budget ",
                        format_bytes(static_cast<double>(residency.budget_bytes)),
                        " is smaller than the embeddings and head (", format_bytes(stem),
                        ") plus one block (", format_bytes(block), ") of this model");
    if (fit < n) {
      window = fit >= 2 ? 2 : 1;
      pinned = static_cast<int>(fit) - window;
    }
    m.weights_fn = w;  // read again by the loader thread (the caller keeps its source alive)
  }
  m.block_bytes_estimate = block_weight_bytes(config, precision, m.tp.size, kept_item);
  if (residency.shard_group) {
    if (residency.budget_bytes > 0)
      throw_input_error(
          "--weights sharded and --weights-budget: choose one (sharded already "
          "holds 1/",
          residency.shard_group->size(), " of the blocks per rank)");
    if (residency.fp8)  // (a shard's gathered slices are not what the kept loader serves)
      throw_input_error(
          "--weights sharded keeps the checkpoint's bytes; with --keep-fp8 or --keep-fp16 use "
          "the resident or streamed modes");
    m.sharded = std::make_unique<ShardedBlocks>(config, w, residency.shard_group, m.tp);
    pinned = 0;
    window = n >= 2 ? 2 : n;
  }
  Impl* impl = &m;
  PrefetchStream<DitBlockWeights>::LoadFn load;
  if (m.sharded) {
    load = [impl](int i) { return impl->load_block(impl->sharded->gather(i), i, true); };
  } else if (residency.budget_bytes > 0) {
    load = [impl](int i) { return impl->load_block(impl->weights_fn, i); };
  } else {  // every block is loaded here, before the constructor returns
    load = [impl, &w](int i) { return impl->load_block(w, i); };
  }
  // The loader packs with as many threads as the compute: on the 2-core machine that was faster
  // than one at 512 and at 1,950 tokens (docs/results/2026-12-04-weights.md, section 5).
  // Sharded: every rank finishes the same gathers, whenever its model is destroyed.
  m.blocks = std::make_unique<PrefetchStream<DitBlockWeights>>(
      n, pinned, window, std::move(load), omp_get_max_threads(), m.sharded != nullptr);
}

WanDit::~WanDit() = default;
WanDit::WanDit(WanDit&&) noexcept = default;
WanDit& WanDit::operator=(WanDit&&) noexcept = default;

const DitConfig& WanDit::config() const { return impl_->cfg; }

void WanDit::set_kv_store(bool on) {
  Impl& m = *impl_;
  m.kv_store_on = on;
  for (size_t b = 0; b < 2; ++b) {
    m.kv_store32[b].clear();
    m.kv_store16[b].clear();
    if (on) {
      m.kv_store32[b].resize(static_cast<size_t>(m.cfg.num_layers));
      m.kv_store16[b].resize(static_cast<size_t>(m.cfg.num_layers));
    }
  }
  m.kv_store_tokens = {};
}

void WanDit::set_block_hook(std::shared_ptr<BlockStackHook> hook) {
  impl_->block_hook = std::move(hook);
  for (auto& r : impl_->stack_residual) r = Buffer<float>();
  impl_->stack_residual_n = {};
}

void WanDit::set_linear_hook(std::shared_ptr<LinearHook> hook) {
  impl_->linear_hook = std::move(hook);
}

const char* linear_site_name(LinearSite site) {
  static const char* const names[kLinearSites] = {"qkv",     "o",      "cross_q",
                                                  "cross_o", "ffn_in", "ffn_out"};
  return names[static_cast<int>(site)];
}

bool WanDit::Impl::hooked_linear(const DitState& st, int layer, LinearSite site,
                                 const PackedLinear& linear, const void* x, bool x_bf16,
                                 int64_t rows, float* y, BFloat16* y16) {
  if (linear_hook == nullptr || st.active != nullptr) return false;
  LinearCall c;
  c.step = st.step;
  c.cfg_branch = st.cfg_branch;
  c.layer = layer;
  c.site = site;
  c.linear = &linear;
  c.x = x;
  c.x_bf16 = x_bf16;
  c.rows = rows;
  c.y = y;
  c.y16 = y16;
  return linear_hook->forward(c);
}

void WanDit::set_attention(std::shared_ptr<sparse::AttentionPolicy> policy,
                           sparse::AttentionDiagnostics* diagnostics) {
  impl_->self_attn.set_policy(std::move(policy), diagnostics);
}
Precision WanDit::precision() const { return impl_->precision; }

void WanDit::set_context(const ExecContext& ctx) {
  const int tp_size = ctx.mesh != nullptr ? ctx.mesh->tp().size() : 1;
  const int tp_rank = ctx.mesh != nullptr ? ctx.mesh->tp().rank() : 0;
  VIDAX_CHECK(tp_size == impl_->tp.size && tp_rank == impl_->tp.rank,
              "WanDit: weights loaded for tp rank ", impl_->tp.rank, " of ", impl_->tp.size,
              ", context has rank ", tp_rank, " of ", tp_size);
  impl_->ctx = ctx;
}

// The cache entry for these inputs: the one computed for exactly the same values, else the
// least recently used one, emptied.
CrossKvEntry& WanDit::Impl::cross_kv_entry(const Tensor& context, const Tensor& clip) {
  std::vector<float> ctx_key = context.to_float_vector();
  ctx_key.push_back(static_cast<float>(context.dim(0)));
  std::vector<float> clip_key = clip.defined() ? clip.to_float_vector() : std::vector<float>{};
  CrossKvEntry* lru = &cross_kv_cache[0];
  for (CrossKvEntry& e : cross_kv_cache) {
    if (e.valid && e.context_key == ctx_key && e.clip_key == clip_key) {
      e.last_use = ++cross_kv_clock;
      return e;
    }
    if (!e.valid || e.last_use < lru->last_use) lru = &e;
  }
  const auto layers = static_cast<size_t>(cfg.num_layers);
  lru->valid = true;
  lru->last_use = ++cross_kv_clock;
  lru->context_key = std::move(ctx_key);
  lru->clip_key = std::move(clip_key);
  lru->text.resize(layers);
  lru->image.resize(layers);
  lru->text16.resize(layers);
  lru->image16.resize(layers);
  lru->text_done.assign(layers, 0);
  lru->image_done.assign(layers, 0);
  return *lru;
}

bool WanDit::Impl::sequence_parallel() const {
  return ctx.mesh != nullptr && ctx.mesh->sp().size() > 1;
}

size_t WanDit::Impl::stem_bytes() const {
  size_t n = 0;
  for (const auto* l :
       {&patch_embedding, &text0, &text2, &time0, &time2, &time_projection, &head, &img1, &img3})
    n += l->defined() ? l->packed_bytes() : 0;
  return n;
}

size_t WanDit::weight_bytes() const {
  const Impl& m = *impl_;
  size_t n = m.stem_bytes();
  const PrefetchStream<DitBlockWeights>& b = *m.blocks;
  for (int i = 0; i < b.pinned(); ++i) n += b.pinned_item(i).bytes();
  // Streamed blocks: at most `window` of them at a time; sharded: this rank's chunks too.
  n += static_cast<size_t>(b.window() * m.block_bytes_estimate);
  if (m.sharded) n += m.sharded->held_bytes();
  return n;
}

WeightStreamStats WanDit::weight_stream_stats() const {
  const PrefetchStream<DitBlockWeights>& b = *impl_->blocks;
  const PrefetchStats s = b.stats();
  WeightStreamStats out;
  out.streamed_blocks = b.size() - b.pinned();
  out.pinned_blocks = b.pinned();
  out.window = b.window();
  out.loads = s.loads - b.pinned();
  out.uses = s.uses;
  out.load_seconds = s.load_seconds;
  out.wait_seconds = s.wait_seconds;
  return out;
}

void WanDit::Impl::linear_f32_in(const PackedLinear& linear, const float* in, int64_t rows,
                                 float* out) {
  if (linear.compute_dtype() == DType::kF32) {
    linear.forward(in, rows, out);
    return;
  }
  const size_t n = static_cast<size_t>(rows * linear.in_features());
  linear_in16.resize(n);
  convert_floats(in, DType::kF32, linear_in16.data(), DType::kBF16, n);
  linear.forward(linear_in16.data(), rows, out);
}

double WanDit::activation_bytes(const DitConfig& c, int64_t tokens) {
  // Residual, f32 and bf16 activations, qkv (f32 + bf16), attention output, GEMM output,
  // FFN hidden (f32 or bf16), patches and head output; see dit_block.cpp.
  const double l = static_cast<double>(tokens), d = static_cast<double>(c.dim);
  const double widest = static_cast<double>(std::max(c.dim, c.ffn_dim));
  // The cached cross-attention keys / values of two contexts (f32, the upper estimate).
  const double context_rows = static_cast<double>(c.text_len + 1 + (c.image_branch() ? 257 : 0));
  const double cross_kv_cache = 2.0 * static_cast<double>(c.num_layers) * context_rows * 2 * d * 4;
  return l * (4 * d + 6 * widest + 18 * d + 8 * d + 4 * static_cast<double>(c.ffn_dim) +
              8.0 * static_cast<double>(c.in_dim * c.patch_volume())) +
         cross_kv_cache;
}

double WanDit::block_stack_flops(const DitConfig& c, int64_t L) {
  const double d = static_cast<double>(c.dim), l = static_cast<double>(L);
  const double tl = static_cast<double>(c.text_len);
  double per_block = 2 * l * 4 * d * d                       // q, k, v, o
                     + 4 * l * l * d                         // self attention (QK^T and PV)
                     + 2 * (2 * l * d * d + 2 * tl * d * d)  // cross q, o and k, v
                     + 4 * l * tl * d                        // cross attention
                     + 2 * l * 2 * d * static_cast<double>(c.ffn_dim);  // FFN
  if (c.image_branch()) per_block += 2 * 2 * 257.0 * d * d + 4 * l * 257.0 * d;
  return per_block * static_cast<double>(c.num_layers);
}

double WanDit::subset_flops(const DitConfig& c, int64_t L, int64_t active) {
  // Every term is per row except the self-attention scores, which are active x L.
  const double a = static_cast<double>(active), l = static_cast<double>(L);
  const double d = static_cast<double>(c.dim), layers = static_cast<double>(c.num_layers);
  const double full = forward_flops(c, L);
  const double self_scores = 4 * l * l * d * layers;
  const double text =
      2 * static_cast<double>(c.text_len) * (static_cast<double>(c.text_dim) * d + d * d) +
      layers * 2 * 2 * static_cast<double>(c.text_len) * d * d;  // per call
  const double per_row = (full - self_scores - text) / l;
  return per_row * a + 4 * a * l * d * layers + text;
}

double WanDit::forward_flops(const DitConfig& c, int64_t L) {
  const double d = static_cast<double>(c.dim), l = static_cast<double>(L);
  const double tl = static_cast<double>(c.text_len);
  double total = block_stack_flops(c, L);
  total += 2 * l * d * static_cast<double>(c.in_dim * c.patch_volume());   // patch embedding
  total += 2 * tl * (static_cast<double>(c.text_dim) * d + d * d);         // text embedding
  total += 2 * l * d * static_cast<double>(c.out_dim * c.patch_volume());  // head
  return total;
}

Tensor WanDit::forward(const DitSample& s, const CaptureFn& capture) {
  Impl& m = *impl_;
  const DitConfig& c = m.cfg;
  const int64_t dim = c.dim;

  // ---- Validate inputs (user-facing errors name the input and what was expected).
  require_float(s.x, "x");
  require_float(s.y, "y");
  require_float(s.context, "context");
  require_float(s.clip_fea, "clip_fea");
  if (!s.x.defined() || s.x.rank() != 4)
    throw_input_error("x: expected a latent [C, F, H, W], got ",
                      s.x.defined() ? s.x.describe() : "nothing");
  Tensor x_in = s.x;
  if (c.kind == DitKind::kI2V && !s.y.defined())
    throw_input_error("an i2v model needs 'y' [", c.in_dim - s.x.dim(0), ", F, H, W]",
                      c.image_branch() ? " and 'clip_fea'" : "");
  if (c.image_branch() && !s.clip_fea.defined())
    throw_input_error("an i2v model with a CLIP image branch needs 'clip_fea' [1, 257, ",
                      c.clip_dim, "]");
  // y (mask + image latents) is concatenated to x on channels whenever given, as the
  // reference's `if y is not None` (Wan 2.1 I2V / FLF2V and Wan 2.2 I2V A14B pass it).
  if (s.y.defined()) {
    if (s.y.rank() != 4 || s.y.dim(1) != s.x.dim(1) || s.y.dim(2) != s.x.dim(2) ||
        s.y.dim(3) != s.x.dim(3))
      throw_input_error("y: shape ", s.y.shape().str(), " does not match x ", s.x.shape().str(),
                        " in F, H, W");
    const int64_t cx = s.x.dim(0), cy = s.y.dim(0);
    Tensor cat =
        Tensor::zeros(Shape{cx + cy, s.x.dim(1), s.x.dim(2), s.x.dim(3)});  // [C_in, F, H, W]
    cat.slice(0, 0, cx).copy_from(s.x.dtype() == DType::kF32 ? s.x.contiguous()
                                                             : s.x.to(DType::kF32));
    cat.slice(0, cx, cx + cy)
        .copy_from(s.y.dtype() == DType::kF32 ? s.y.contiguous() : s.y.to(DType::kF32));
    x_in = cat;
  }
  if (x_in.dim(0) != c.in_dim)
    throw_input_error("x: expected ", c.in_dim, " input channels (model in_dim), got shape ",
                      x_in.shape().str());
  for (int i = 0; i < 3; ++i) {
    if (s.x.dim(i + 1) % c.patch[static_cast<size_t>(i)] != 0 || s.x.dim(i + 1) == 0)
      throw_input_error("x: extent ", s.x.dim(i + 1), " of dim ", i + 1, " of ", s.x.shape().str(),
                        " is not a positive multiple of the patch size ",
                        c.patch[static_cast<size_t>(i)]);
  }
  DitState st;
  st.capture = capture ? &capture : nullptr;
  st.step = s.step;
  st.steps = s.steps;
  st.cfg_branch = s.cfg_branch;
  st.grid = {s.x.dim(1) / c.patch[0], s.x.dim(2) / c.patch[1], s.x.dim(3) / c.patch[2]};
  const int64_t L = st.grid[0] * st.grid[1] * st.grid[2];
  st.tokens = L;
  if (st.grid[0] > 1024 || st.grid[1] > 1024 || st.grid[2] > 1024)
    throw_input_error("x: token grid ", st.grid[0], "x", st.grid[1], "x", st.grid[2],
                      " exceeds the 1024 RoPE positions per axis");
  if (m.sequence_parallel() && m.ctx.mesh->ring().size() > 1 && m.self_attn.has_policy())
    throw_input_error("a sparse attention policy runs under ulysses and cfg; ring attention is ",
                      "dense only (mesh ", m.ctx.mesh->spec().str(), ")");
  {
    // This rank's rows: all L in one process, ceil(L / sp) under a sequence-parallel mesh.
    const int64_t sp = m.sequence_parallel() ? m.ctx.mesh->sp().size() : 1;
    const double need = activation_bytes(c, (L + sp - 1) / sp);
    const double have =
        static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
    if (have > 0 && need > have)
      throw_input_error("x: ", s.x.shape().str(), " gives ", L, " tokens, whose activations need ~",
                        need / (1 << 30), " GiB; this machine has ", have / (1 << 30),
                        " GiB of memory");
  }
  if (s.seq_len != 0 && s.seq_len < L)
    throw_input_error("seq_len: ", s.seq_len, " is smaller than the ", L, " patch tokens of x");
  if (!s.context.defined() || s.context.rank() != 2 || s.context.dim(1) != c.text_dim)
    throw_input_error("context: expected [L, ", c.text_dim, "] text features, got ",
                      s.context.defined() ? s.context.shape().str() : "nothing");
  if (s.context.dim(0) > c.text_len)
    throw_input_error("context: ", s.context.dim(0), " tokens exceed the model's text_len ",
                      c.text_len);
  if (!s.t.defined() || (s.t.numel() != 1 && s.t.numel() < L))
    throw_input_error("t: expected one timestep or one per token (>= ", L, "), got ",
                      s.t.defined() ? s.t.shape().str() : "nothing");
  const bool subset = s.tokens != nullptr;
  if (subset) {
    const std::vector<int64_t>& tk = *s.tokens;
    if (!m.kv_store_on)
      throw_input_error("a token-subset forward needs the key/value store (set_kv_store)");
    if (m.sequence_parallel() || m.tp.size > 1)
      throw_input_error("a token-subset forward runs in one process or under cfg only, not mesh ",
                        m.ctx.mesh->spec().str());
    if (capture || m.block_hook)
      throw_input_error("a token-subset forward takes no captures and no block-stack hook");
    if (tk.empty()) throw_input_error("tokens: empty subset");
    for (size_t i = 0; i < tk.size(); ++i)
      if (tk[i] < 0 || tk[i] >= L || (i > 0 && tk[i] <= tk[i - 1]))
        throw_input_error("tokens: entry ", i, " (", tk[i], ") is not sorted, unique and below ",
                          L);
    const size_t b = static_cast<size_t>(s.cfg_branch == 1 ? 1 : 0);
    if (m.kv_store_tokens[b] != L)
      throw_input_error("a token-subset forward of CFG branch ", b, " needs a whole forward of ",
                        "the same ", L, " tokens first (to fill the key/value store)");
  }

  // ---- Causal calls: a chunk written into a key/value cache, or block-causal attention.
  if (s.kv_cache != nullptr || s.causal_block_frames != 0) {
    if (subset || m.kv_store_on)
      throw_input_error("a causal forward takes no token subset and no key/value store");
    if (m.sequence_parallel())
      throw_input_error("a causal forward runs in one process or under tp, not mesh ",
                        m.ctx.mesh->spec().str());
    if (m.block_hook || m.linear_hook)
      throw_input_error("a causal forward takes no block-stack or linear hook");
    if (m.self_attn.has_policy())
      throw_input_error("a causal forward runs dense self-attention (no attention policy)");
    if (c.patch[0] != 1)
      throw_input_error("a causal forward needs a temporal patch size of 1, the model has ",
                        c.patch[0]);
  }
  const int64_t frame_tokens = st.grid[1] * st.grid[2];
  if (s.causal_block_frames < 0 ||
      (s.causal_block_frames > 0 && st.grid[0] % s.causal_block_frames != 0))
    throw_input_error("causal_block_frames: ", s.causal_block_frames, " does not divide the ",
                      st.grid[0], " latent frames of x");
  if (s.pbsa != nullptr && s.kv_cache == nullptr)
    throw_input_error("pbsa attention runs on a cached causal chunk (kv_cache)");
  if (s.causal_block_frames > 0 && s.kv_cache != nullptr)
    throw_input_error("a forward is either a cached chunk or block-causal, not both");
  st.block_causal_tokens = s.causal_block_frames * frame_tokens;
  if (s.kv_cache != nullptr) {
    CausalKvCache& kc = *s.kv_cache;
    const int64_t heads = c.num_heads / m.tp.size;
    if (kc.options().frame_tokens != frame_tokens)
      throw_input_error("kv cache: it holds frames of ", kc.options().frame_tokens,
                        " tokens, x has ", frame_tokens, " per frame (", s.x.shape().str(), ")");
    if (kc.layers() != c.num_layers || kc.width() != heads * c.head_dim() ||
        kc.bf16() != (m.compute == DType::kBF16))
      throw_input_error("kv cache: made for ", kc.layers(), " layers of width ", kc.width(),
                        kc.bf16() ? " (bf16)" : " (f32)", ", this model runs ", c.num_layers,
                        " layers of width ", heads * c.head_dim(),
                        m.compute == DType::kBF16 ? " (bf16)" : " (f32)");
    if (s.start_frame < 0) throw_input_error("start_frame: ", s.start_frame, " is negative");
    st.slot = kc.plan(s.start_frame * frame_tokens, L);
    st.kv_cache = &kc;
    st.pbsa = s.pbsa;
    if (s.pbsa && s.pbsa->samples > 0)
      st.key_mass.assign(static_cast<size_t>(st.slot.local_end), 0.0);
    st.causal_first_token = s.start_frame * frame_tokens;
    // RoPE frame positions run on past the reference's 1024 (where its table ends): the table
    // grows, the angles of the positions it had are unchanged.
    const int64_t last_frame = s.start_frame + st.grid[0];
    if (last_frame > m.rope.max_positions)
      m.rope = Rope3dTable::build(c.head_dim(), std::max(last_frame, 2 * m.rope.max_positions));
  }

  // ---- Timesteps: unique values, token runs.
  {
    std::vector<double> values;
    const int64_t n = s.t.numel() == 1 ? 1 : L;
    const std::vector<double> per_token = read_values(s.t, n);
    std::unordered_map<double, int64_t> index_of;
    int64_t prev = -1;
    for (int64_t i = 0; i < n; ++i) {
      const double v = per_token[static_cast<size_t>(i)];
      if (std::isnan(v)) throw_input_error("t: timestep ", i, " is NaN");
      auto [it, inserted] = index_of.emplace(v, static_cast<int64_t>(values.size()));
      if (inserted) values.push_back(v);
      const int64_t idx = it->second;
      if (idx == prev) {
        st.runs.back().count++;
      } else {
        st.runs.push_back({i, 1, idx});
        prev = idx;
      }
    }
    if (s.t.numel() == 1) st.runs.front().count = L;
    st.unique_t = static_cast<int64_t>(values.size());
    st.timestep = values.front();
    std::vector<float> sinus(static_cast<size_t>(c.freq_dim));
    std::vector<float> h(static_cast<size_t>(dim)), act(static_cast<size_t>(dim));
    st.e.resize(static_cast<size_t>(st.unique_t * dim));
    st.e0.resize(static_cast<size_t>(st.unique_t * 6 * dim));
    for (int64_t u = 0; u < st.unique_t; ++u) {
      sinusoidal_embedding(values[static_cast<size_t>(u)], c.freq_dim, sinus.data());
      m.time0.forward(sinus.data(), 1, h.data());
      silu(h.data(), h.data(), dim);
      float* e = st.e.data() + u * dim;
      m.time2.forward(h.data(), 1, e);
      silu(e, act.data(), dim);
      m.time_projection.forward(act.data(), 1, st.e0.data() + u * 6 * dim);
    }
    if (st.capture) {
      // Wan 2.2 (ti2v) expands a scalar t to every token, so its e/e0 are per token.
      if (s.t.numel() == 1 && c.kind != DitKind::kTI2V) {
        capture("e", Tensor::from_floats(st.e, Shape{1, dim}));
        capture("e0", Tensor::from_floats(st.e0, Shape{1, 6, dim}));
      } else {
        Tensor e = Tensor::zeros(Shape{1, L, dim}), e0 = Tensor::zeros(Shape{1, L, 6, dim});
        for (const auto& r : st.runs) {
          for (int64_t t = r.begin; t < r.begin + r.count; ++t) {
            std::memcpy(e.mutable_data<float>() + t * dim, st.e.data() + r.index * dim,
                        sizeof(float) * static_cast<size_t>(dim));
            std::memcpy(e0.mutable_data<float>() + t * 6 * dim, st.e0.data() + r.index * 6 * dim,
                        sizeof(float) * static_cast<size_t>(6 * dim));
          }
        }
        capture("e", e);
        capture("e0", e0);
      }
    }
  }

  // ---- This process's rows: all L, or ceil(L / sp) under a sequence-parallel mesh (the runs
  // re-indexed to local rows; padding rows take the last run's timestep).
  if (st.capture && (m.sequence_parallel() || m.tp.size > 1))
    throw_input_error("named intermediates (capture) need a single process, not mesh ",
                      m.ctx.mesh->spec().str());
  if (subset) {
    // The rows held are the subset's tokens: one run per stretch of a unique timestep.
    const std::vector<int64_t>& tk = *s.tokens;
    std::vector<int64_t> index_of_token(static_cast<size_t>(L));
    for (const auto& r : st.runs)
      for (int64_t t = r.begin; t < r.begin + r.count; ++t)
        index_of_token[static_cast<size_t>(t)] = r.index;
    std::vector<TimestepRun> local;
    for (size_t i = 0; i < tk.size(); ++i) {
      const int64_t idx = index_of_token[static_cast<size_t>(tk[i])];
      if (!local.empty() && local.back().index == idx) {
        local.back().count++;
      } else {
        local.push_back({static_cast<int64_t>(i), 1, idx});
      }
    }
    st.runs = std::move(local);
    st.shard = seq_shard(static_cast<int64_t>(tk.size()), 0, 1);
    st.active = s.tokens;
  } else if (m.sequence_parallel()) {
    const dist::Group& sp = m.ctx.mesh->sp();
    st.shard = seq_shard(L, sp.rank(), sp.size());
    std::vector<TimestepRun> local;
    const int64_t lo = st.shard.first, hi = st.shard.first + st.shard.real;
    for (const auto& r : st.runs) {
      const int64_t b = std::max(r.begin, lo), e = std::min(r.begin + r.count, hi);
      if (b < e) local.push_back({b - lo, e - b, r.index});
    }
    if (st.shard.real < st.shard.per_rank)
      local.push_back({st.shard.real, st.shard.per_rank - st.shard.real, st.runs.back().index});
    st.runs = std::move(local);
  } else {
    st.shard = seq_shard(L, 0, 1);
  }
  const int64_t rows = st.shard.per_rank;

  // ---- Patch embedding: [rows, C*pv] x [dim, C*pv]^T.
  m.x.resize(static_cast<size_t>(rows * dim));
  {
    Tensor patches = patchify(x_in, c.patch);  // [L, C*pt*ph*pw]
    const int64_t pv = patches.dim(1);
    if (subset) {
      Buffer<float> local(static_cast<size_t>(rows * pv));  // the subset's rows, in order
      for (int64_t i = 0; i < rows; ++i)
        std::copy_n(patches.data<float>() + (*s.tokens)[static_cast<size_t>(i)] * pv, pv,
                    local.data() + i * pv);
      m.linear_f32_in(m.patch_embedding, local.data(), rows, m.x.data());
    } else if (rows == L) {
      m.linear_f32_in(m.patch_embedding, patches.data<float>(), L, m.x.data());
    } else {
      Buffer<float> local(static_cast<size_t>(rows * pv));  // this rank's rows, zero padding
      std::fill_n(local.data(), rows * pv, 0.0f);
      std::copy_n(patches.data<float>() + st.shard.first * pv, st.shard.real * pv, local.data());
      m.linear_f32_in(m.patch_embedding, local.data(), rows, m.x.data());
    }
    if (st.capture)
      capture("patch_tokens",
              Tensor::from_floats({m.x.data(), static_cast<size_t>(L * dim)}, Shape{1, L, dim}));
  }

  st.cross_kv = &m.cross_kv_entry(s.context, s.clip_fea);

  // ---- Text embedding of the context zero-padded to text_len (padding rows are attended).
  // Every padding row is the same zero vector, so it embeds to the same row and gives the same
  // cross-attention key and value in every block: only the real rows and one padding row are
  // embedded, and attention counts that row text_len - n times (AttentionDims::kv_last_repeat).
  {
    const int64_t tl = c.text_len, n = s.context.dim(0);
    const int64_t rows = n < tl ? n + 1 : n;  // [real rows | one padding row]
    Tensor padded = Tensor::zeros(Shape{rows, c.text_dim});
    padded.slice(0, 0, n).copy_from(s.context.dtype() == DType::kF32 ? s.context.contiguous()
                                                                     : s.context.to(DType::kF32));
    m.tmp.resize(static_cast<size_t>(rows * dim));
    m.linear_f32_in(m.text0, padded.data<float>(), rows, m.tmp.data());  // GELU fused
    st.context.resize(static_cast<size_t>(rows * dim));
    m.linear_f32_in(m.text2, m.tmp.data(), rows, st.context.data());
    st.context_rows = rows;
    st.context_last_repeat = n < tl ? tl - n : 1;
    if (st.capture) {  // the reference's [1, text_len, dim], padding rows spelled out
      Tensor full = Tensor::zeros(Shape{1, tl, dim});
      float* dst = full.mutable_data<float>();
      for (int64_t r = 0; r < tl; ++r) {
        const float* src = st.context.data() + std::min(r, rows - 1) * dim;
        std::copy_n(src, dim, dst + r * dim);
      }
      capture("context_emb", full);
    }
  }

  // ---- i2v: CLIP image features -> image tokens, prepended to the text in cross-attention.
  if (c.image_branch()) {
    Tensor clip =
        s.clip_fea.dtype() == DType::kF32 ? s.clip_fea.contiguous() : s.clip_fea.to(DType::kF32);
    // [images, N, clip_dim] -> [images * N, clip_dim] (FLF2V: both images' tokens in a row).
    if (clip.rank() == 3) clip = clip.reshape(Shape{clip.dim(0) * clip.dim(1), clip.dim(2)});
    if (clip.rank() != 2 || clip.dim(1) != c.clip_dim || clip.dim(0) == 0)
      throw_input_error("clip_fea: expected [1, N, ", c.clip_dim, "], got ",
                        s.clip_fea.shape().str());
    const int64_t n = clip.dim(0);
    if (!m.img_emb_pos.empty()) {  // FLF2V: + emb_pos before the MLP
      if (n != c.flf_pos_tokens)
        throw_input_error("clip_fea: a first-last-frame model takes ", c.flf_pos_tokens,
                          " CLIP tokens (two images), got ", s.clip_fea.shape().str());
      clip = clip.clone();  // never write into the caller's tensor
      float* cp = clip.mutable_data<float>();
      for (int64_t k = 0; k < n * c.clip_dim; ++k) cp[k] += m.img_emb_pos[static_cast<size_t>(k)];
    }
    Buffer<float> ln(static_cast<size_t>(n * c.clip_dim)), h(static_cast<size_t>(n * c.clip_dim));
    layer_norm_rows(clip.data<float>(), ln.data(), n, c.clip_dim, m.img_ln0_w.data(),
                    m.img_ln0_b.data(), 1e-5f);
    m.linear_f32_in(m.img1, ln.data(), n, h.data());  // GELU(erf) fused
    st.clip.resize(static_cast<size_t>(n * dim));
    m.linear_f32_in(m.img3, h.data(), n, st.clip.data());
    layer_norm_rows(st.clip.data(), st.clip.data(), n, dim, m.img_ln4_w.data(), m.img_ln4_b.data(),
                    1e-5f);
    st.clip_rows = n;
    if (st.capture)
      capture("clip_emb", Tensor::from_floats({st.clip.data(), static_cast<size_t>(n * dim)},
                                              Shape{1, n, dim}));
  }

  // ---- Transformer blocks, or the residual a block-stack hook keeps in their place.
  const bool hooked = m.block_hook != nullptr;
  const bool run_blocks = !hooked || m.block_hook->run_blocks(s, {st.e.data(), st.e.size()},
                                                              {st.e0.data(), st.e0.size()});
  const size_t branch = static_cast<size_t>(s.cfg_branch == 1 ? 1 : 0);
  Buffer<float>& residual = m.stack_residual[branch];
  const size_t n = static_cast<size_t>(rows * dim);
  if (run_blocks) {
    if (hooked) {
      residual.resize(n);
      m.stack_residual_n[branch] = n;
      std::copy_n(m.x.data(), n, residual.data());  // x before the blocks
    }
    try {
      for (int64_t i = 0; i < c.num_layers; ++i) m.block_forward(static_cast<int>(i), st);
    } catch (...) {
      if (st.kv_cache != nullptr) st.kv_cache->invalidate();  // some layers wrote, some not
      throw;
    }
    if (st.kv_cache != nullptr) {
      st.kv_cache->commit(st.slot);
      for (size_t r = 0; r < st.key_mass.size(); ++r)  // PBSA saliency, by absolute token
        st.kv_cache->add_block_mass(st.kv_cache->token_of_row(static_cast<int64_t>(r)),
                                    st.key_mass[r]);
    }
    if (hooked) {
      float* r = residual.data();
      const float* x = m.x.data();
#pragma omp parallel for schedule(static)
      for (int64_t k = 0; k < static_cast<int64_t>(n); ++k) r[k] = x[k] - r[k];
      m.block_hook->after_blocks(s, {residual.data(), n}, rows, dim);
    }
  } else {
    VIDAX_CHECK(m.stack_residual_n[branch] == n, "block-stack hook skipped the blocks of CFG ",
                "branch ", branch, " before they ran at this size (", m.stack_residual_n[branch],
                " vs ", n, " floats)");
    float* x = m.x.data();
    const float* r = residual.data();
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < static_cast<int64_t>(n); ++k) x[k] += r[k];
  }

  // ---- Head: LN(x) * (1 + (m[1] + e)) + (m[0] + e) -> Linear -> unpatchify.
  const int64_t out_features = m.head.out_features();
  Buffer<float> head_out(static_cast<size_t>(rows * out_features));
  {
    m.act.resize(static_cast<size_t>(rows * dim));
    std::vector<float> shift(static_cast<size_t>(dim)), scale(static_cast<size_t>(dim));
    for (const auto& r : st.runs) {
      const float* e = st.e.data() + r.index * dim;
      for (int64_t j = 0; j < dim; ++j) {
        shift[static_cast<size_t>(j)] = m.head_modulation[static_cast<size_t>(j)] + e[j];
        scale[static_cast<size_t>(j)] = m.head_modulation[static_cast<size_t>(dim + j)] + e[j];
      }
      layer_norm_modulate_rows(m.x.data() + r.begin * dim, m.act.data() + r.begin * dim, r.count,
                               dim, shift.data(), scale.data(), 0, static_cast<float>(c.eps));
    }
    m.linear_f32_in(m.head, m.act.data(), rows, head_out.data());
    if (st.capture)
      capture("head_out",
              Tensor::from_floats({head_out.data(), static_cast<size_t>(L * out_features)},
                                  Shape{1, L, out_features}));
  }
  if (m.kv_store_on && !subset) m.kv_store_tokens[branch] = L;  // the stores hold every row
  if (subset) {  // the subset's rows in place, zeros elsewhere
    Buffer<float> all(static_cast<size_t>(L * out_features));
    std::fill_n(all.data(), L * out_features, 0.0f);
    for (int64_t i = 0; i < rows; ++i)
      std::copy_n(head_out.data() + i * out_features, out_features,
                  all.data() + (*s.tokens)[static_cast<size_t>(i)] * out_features);
    head_out = std::move(all);
  } else if (rows != L) {  // every sp rank gets every rank's rows, then the padding is cut
    dist::Group& sp = m.ctx.mesh->sp();
    Buffer<float> all(static_cast<size_t>(rows * sp.size() * out_features));  // [sp * rows, out]
    sp.all_gather(head_out.data(), all.data(), rows * out_features, DType::kF32);
    head_out = std::move(all);
  }
  Tensor tokens = Tensor::from_floats({head_out.data(), static_cast<size_t>(L * out_features)},
                                      Shape{L, out_features});
  return unpatchify(tokens, c.out_dim, st.grid, c.patch);
}

}  // namespace vidax::wan
