#include "models/wan/t5_encoder.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/convert.h"
#include "dist/mesh.h"
#include "dist/tensor_parallel.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"
#include "models/wan/t5_attention.h"
#include "models/wan/t5_tensors.h"
#include "nn/linear.h"

namespace vidax::wan {
namespace {

constexpr float kEps = 1e-6f;  // T5LayerNorm

// ids / mask as [L] int64 values; `what` names the tensor in errors.
std::vector<int64_t> read_token_vector(const Tensor& t, const char* what) {
  if (!t.defined()) throw_input_error(what, ": missing");
  if (t.dtype() != DType::kI64 && t.dtype() != DType::kI32)
    throw_input_error(what, ": expected an I64 (or I32) tensor, got ", t.describe());
  if (!(t.rank() == 1 || (t.rank() == 2 && t.dim(0) == 1)))
    throw_input_error(what, ": expected shape [L] or [1, L], got ", t.shape().str());
  const Tensor c = t.contiguous();
  std::vector<int64_t> v(static_cast<size_t>(c.numel()));
  for (int64_t i = 0; i < c.numel(); ++i)
    v[static_cast<size_t>(i)] =
        c.dtype() == DType::kI64 ? c.data<int64_t>()[i] : c.data<int32_t>()[i];
  return v;
}

}  // namespace

// Under tensor parallelism (tp = T) a rank holds its H/T heads of q, k, v (column split) and
// the matching input columns of o (row split), its dim_ffn/T units of gate and fc1 and fc2's
// matching columns (nn/linear.h); o and fc2 give partial sums, all-reduced over tp.
struct T5BlockWeights {
  std::vector<float> norm1, norm2;  // [dim]
  Linear qkv;                       // q, k, v fused: [3 * dim_attn / T, dim], column split
  Linear o;                         // [dim, dim_attn / T], row split
  Linear gate_fc1;                  // gate.0 and fc1 fused: [2 * dim_ffn / T, dim], column split
  Linear fc2;                       // [dim, dim_ffn / T], row split
  std::vector<float> pos_table;     // [num_buckets, heads] (all heads)
};

struct T5Encoder::Impl {
  T5Config cfg;
  Precision precision = Precision::kBF16;
  DType compute = DType::kBF16;
  Tensor embedding;  // [vocab, dim], F32 / BF16 / F16
  std::vector<T5BlockWeights> blocks;
  std::vector<float> final_norm;
  ExecContext ctx;  // its mesh's tp group, when tp > 1
  TpShard tp;

  // Scratch reused across blocks and calls.
  Buffer<float> x, act, qkv, attn, ff, hidden, tmp, bias;
  Buffer<BFloat16> act16, attn16, hidden16;

  // y[L, N] = linear(in[L, K]) with `in` f32; converted through `in16` on the bf16 path.
  void linear(const PackedLinear& l, const float* in, Buffer<BFloat16>& in16, int64_t rows,
              float* out) {
    if (compute == DType::kF32) return l.forward(in, rows, out);
    const size_t n = static_cast<size_t>(rows * l.in_features());
    in16.resize(n);
    convert_floats(in, DType::kF32, in16.data(), DType::kBF16, n);
    l.forward(in16.data(), rows, out);
  }
};

T5Encoder::T5Encoder(const T5Config& config, const WeightFn& w, Precision precision,
                     const ExecContext& ctx)
    : impl_(std::make_unique<Impl>()) {
  config.validate("T5Encoder");
  Impl& m = *impl_;
  m.cfg = config;
  m.ctx = ctx;
  if (ctx.mesh != nullptr) m.tp = {ctx.mesh->tp().rank(), ctx.mesh->tp().size()};
  if (config.num_heads % m.tp.size != 0)
    throw_input_error("tp=", m.tp.size, " does not divide umT5's ", config.num_heads,
                      " attention heads");
  m.precision = precision;
  m.compute = precision == Precision::kBF16 ? DType::kBF16 : DType::kF32;
  const DType cd = m.compute;

  auto checked = [&](const std::string& name, const Shape& shape) {
    Tensor t = w(name);
    if (t.shape() != shape && !(shape.rank() == 1 && t.numel() == shape.numel()))
      throw_input_error("umT5 weight '", name, "': expected shape ", shape.str(), ", got ",
                        t.shape().str());
    if (!is_float(t.dtype()))
      throw_input_error("umT5 weight '", name, "': expected a float tensor, got ", t.describe());
    return t;
  };
  auto vec = [&](const std::string& name) {
    return checked(name, Shape{config.dim}).to_float_vector();
  };

  Tensor emb = checked("token_embedding.weight", Shape{config.vocab, config.dim});
  const bool keep = precision == Precision::kBF16
                        ? emb.dtype() == DType::kBF16
                        : (emb.dtype() == DType::kF32 || emb.dtype() == DType::kBF16 ||
                           emb.dtype() == DType::kF16);
  m.embedding = keep ? emb.contiguous() : emb.to(cd);

  m.blocks.resize(static_cast<size_t>(config.num_layers));
  for (int64_t i = 0; i < config.num_layers; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    T5BlockWeights& bw = m.blocks[static_cast<size_t>(i)];
    const Shape in_proj{config.dim_attn, config.dim}, ffn_in{config.dim_ffn, config.dim};
    bw.norm1 = vec(b + "norm1.weight");
    constexpr LinearSplit kCol = LinearSplit::kColumn, kRow = LinearSplit::kRow;
    constexpr GemmEpilogue kNone = GemmEpilogue::kNone;
    bw.qkv =
        Linear::build(b + "attn.qkv",
                      {checked(b + "attn.q.weight", in_proj), checked(b + "attn.k.weight", in_proj),
                       checked(b + "attn.v.weight", in_proj)},
                      {}, cd, kNone, kCol, m.tp);
    bw.o = Linear::build(b + "attn.o",
                         {checked(b + "attn.o.weight", Shape{config.dim, config.dim_attn})}, {}, cd,
                         kNone, kRow, m.tp);
    bw.norm2 = vec(b + "norm2.weight");
    bw.gate_fc1 = Linear::build(
        b + "ffn.gate_fc1",
        {checked(b + "ffn.gate.0.weight", ffn_in), checked(b + "ffn.fc1.weight", ffn_in)}, {}, cd,
        kNone, kCol, m.tp);
    bw.fc2 = Linear::build(b + "ffn.fc2",
                           {checked(b + "ffn.fc2.weight", Shape{config.dim, config.dim_ffn})}, {},
                           cd, kNone, kRow, m.tp);
    bw.pos_table =
        checked(b + "pos_embedding.embedding.weight", Shape{config.num_buckets, config.num_heads})
            .to_float_vector();
  }
  m.final_norm = vec("norm.weight");
}

T5Encoder::~T5Encoder() = default;
T5Encoder::T5Encoder(T5Encoder&&) noexcept = default;
T5Encoder& T5Encoder::operator=(T5Encoder&&) noexcept = default;

const T5Config& T5Encoder::config() const { return impl_->cfg; }
Precision T5Encoder::precision() const { return impl_->precision; }

size_t T5Encoder::held_weight_bytes() const {
  const Impl& m = *impl_;
  size_t n = m.embedding.nbytes() + m.final_norm.size() * sizeof(float);
  for (const auto& b : m.blocks)
    n += b.qkv.packed_bytes() + b.o.packed_bytes() + b.gate_fc1.packed_bytes() +
         b.fc2.packed_bytes() + (b.norm1.size() + b.norm2.size() + b.pos_table.size()) * 4;
  return n;
}

Tensor T5Encoder::forward(const Tensor& ids_t, const Tensor& mask_t, const CaptureFn& capture) {
  Impl& m = *impl_;
  const T5Config& c = m.cfg;
  const std::vector<int64_t> ids = read_token_vector(ids_t, "ids");
  const std::vector<int64_t> mask_v = read_token_vector(mask_t, "mask");
  const int64_t L = static_cast<int64_t>(ids.size());
  if (L == 0) throw_input_error("ids: no tokens");
  if (static_cast<int64_t>(mask_v.size()) != L)
    throw_input_error("mask: has ", mask_v.size(), " entries, ids has ", L);
  std::vector<uint8_t> key_valid(static_cast<size_t>(L));
  for (int64_t i = 0; i < L; ++i) {
    const int64_t id = ids[static_cast<size_t>(i)], mk = mask_v[static_cast<size_t>(i)];
    if (id < 0 || id >= c.vocab)
      throw_input_error("ids: token ", i, " is ", id, ", outside the vocabulary [0, ", c.vocab,
                        ")");
    if (mk != 0 && mk != 1) throw_input_error("mask: entry ", i, " is ", mk, ", expected 0 or 1");
    key_valid[static_cast<size_t>(i)] = static_cast<uint8_t>(mk);
  }
  if (std::none_of(key_valid.begin(), key_valid.end(), [](uint8_t v) { return v != 0; }))
    throw_input_error("mask: no real token (all zeros)");

  // This rank's heads (and their attention width) and FFN units: all of them without tp.
  const int64_t dim = c.dim, da = c.dim_attn / m.tp.size, ffn = c.dim_ffn / m.tp.size;
  const int64_t H = c.num_heads / m.tp.size, head0 = m.tp.rank * H;
  if (capture && m.tp.size > 1)
    throw_input_error("named intermediates (capture) need a single process, not tp=", m.tp.size);
  dist::Group* tp_group = m.tp.size > 1 ? &m.ctx.mesh->tp() : nullptr;
  const auto sz = [](int64_t n) { return static_cast<size_t>(n); };
  m.x.resize(sz(L * dim));
  m.act.resize(sz(L * dim));
  m.tmp.resize(sz(L * dim));
  m.qkv.resize(sz(L * 3 * da));
  m.attn.resize(sz(L * da));
  m.ff.resize(sz(L * 2 * ffn));
  m.hidden.resize(sz(L * ffn));
  m.bias.resize(sz(H * (2 * L - 1)));
  float* x = m.x.data();

  // Embedding rows, converted from the stored dtype.
  const auto* table = static_cast<const std::byte*>(m.embedding.raw_data());
  const size_t row_bytes = sz(dim) * m.embedding.itemsize();
#pragma omp parallel for schedule(static) if (L * dim > (1 << 16))
  for (int64_t i = 0; i < L; ++i)
    convert_floats(table + sz(ids[sz(i)]) * row_bytes, m.embedding.dtype(), x + i * dim,
                   DType::kF32, sz(dim));

  // Buckets by relative position rel = j - i in [-(L-1), L-1].
  std::vector<int64_t> bucket(sz(2 * L - 1));
  for (int64_t r = 0; r < 2 * L - 1; ++r)
    bucket[sz(r)] = t5_relative_bucket(r - (L - 1), c.num_buckets);

  auto emit = [&](const std::string& name, const float* data, const Shape& shape) {
    if (!capture) return;
    Tensor t = Tensor::zeros(shape, DType::kF32);
    std::memcpy(t.raw_mutable_data(), data, t.nbytes());
    capture(name, t);
  };
  if (capture) {
    Tensor rb = Tensor::zeros(Shape{L, L}, DType::kI64);
    int64_t* p = rb.mutable_data<int64_t>();
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < L; ++j) p[i * L + j] = bucket[sz(j - i + L - 1)];
    capture("rel_buckets", rb);
  }
  emit("embed", x, Shape{1, L, dim});

  const T5AttentionDims ad{L, H, c.head_dim(), 3 * da, 3 * da, 3 * da, da};
  for (int64_t bi = 0; bi < c.num_layers; ++bi) {
    const T5BlockWeights& bw = m.blocks[sz(bi)];
    const std::string name = "block" + std::to_string(bi) + ".";
    float* bias = m.bias.data();  // [heads, 2L - 1]
    for (int64_t h = 0; h < H; ++h)
      for (int64_t r = 0; r < 2 * L - 1; ++r)
        bias[h * (2 * L - 1) + r] = bw.pos_table[sz(bucket[sz(r)] * c.num_heads + head0 + h)];
    if (capture) {
      Tensor pb = Tensor::zeros(Shape{1, H, L, L}, DType::kF32);
      float* p = pb.mutable_data<float>();
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < L; ++i)
          for (int64_t j = 0; j < L; ++j)
            p[(h * L + i) * L + j] = bias[h * (2 * L - 1) + j - i + L - 1];
      capture(name + "pos_bias", pb);
    }

    // x = x + o(attention(norm1(x)))
    rms_norm_rows(x, m.act.data(), L, dim, bw.norm1.data(), kEps);
    m.linear(bw.qkv, m.act.data(), m.act16, L, m.qkv.data());  // [L, 3 * dim_attn]
    t5_attention(m.qkv.data(), m.qkv.data() + da, m.qkv.data() + 2 * da, m.attn.data(), bias,
                 key_valid.data(), ad);                        // [L, dim_attn]
    m.linear(bw.o, m.attn.data(), m.attn16, L, m.tmp.data());  // [L, dim]
    if (tp_group != nullptr) tp_reduce_rows(*tp_group, m.tmp.data(), L, dim, nullptr);
    emit(name + "attn_out", m.tmp.data(), Shape{1, L, dim});
    add_rows(x, m.tmp.data(), L * dim);

    // x = x + fc2(fc1(h) * gelu_tanh(gate(h))), h = norm2(x)
    rms_norm_rows(x, m.act.data(), L, dim, bw.norm2.data(), kEps);
    m.linear(bw.gate_fc1, m.act.data(), m.act16, L, m.ff.data());  // [L, 2 * dim_ffn]
    float* hidden = m.hidden.data();                               // [L, dim_ffn]
#pragma omp parallel for schedule(static) if (L * ffn > (1 << 16))
    for (int64_t i = 0; i < L; ++i) {
      const float* gate = m.ff.data() + i * 2 * ffn;
      const float* lin = gate + ffn;
      float* hr = hidden + i * ffn;
      gelu_tanh(gate, hr, ffn);
      for (int64_t k = 0; k < ffn; ++k) hr[k] = lin[k] * hr[k];
    }
    m.linear(bw.fc2, hidden, m.hidden16, L, m.tmp.data());  // [L, dim]
    if (tp_group != nullptr) tp_reduce_rows(*tp_group, m.tmp.data(), L, dim, nullptr);
    emit(name + "ffn_out", m.tmp.data(), Shape{1, L, dim});
    add_rows(x, m.tmp.data(), L * dim);
    emit(name + "out", x, Shape{1, L, dim});
  }

  Tensor out = Tensor::zeros(Shape{L, dim}, DType::kF32);
  rms_norm_rows(x, out.mutable_data<float>(), L, dim, m.final_norm.data(), kEps);
  if (capture) capture("out", out.reshape(Shape{1, L, dim}));
  return out;
}

Tensor T5Encoder::encode(const TokenizedText& text) {
  if (!text.ids.defined() || text.count < 1 || text.count > text.ids.numel())
    throw_input_error("encode: tokenized text has count ", text.count, " for ",
                      text.ids.defined() ? text.ids.numel() : 0, " ids");
  const Tensor ids = text.ids.reshape(Shape{text.ids.numel()}).slice(0, 0, text.count);
  const Tensor mask = Tensor::zeros(Shape{text.count}, DType::kI64);
  std::fill_n(mask.mutable_data<int64_t>(), text.count, int64_t{1});
  return forward(ids, mask);
}

Tensor T5Encoder::forward_batch(const Tensor& ids, const Tensor& mask, const CaptureFn& capture) {
  for (const auto& [t, what] : {std::pair{&ids, "ids"}, std::pair{&mask, "mask"}})
    if (!t->defined() || t->rank() != 2)
      throw_input_error(what, ": expected shape [B, L], got ",
                        t->defined() ? t->shape().str() : std::string("nothing"));
  if (ids.shape() != mask.shape())
    throw_input_error("mask: shape ", mask.shape().str(), " differs from ids ", ids.shape().str());
  const int64_t B = ids.dim(0), L = ids.dim(1), dim = impl_->cfg.dim;
  if (B < 1) throw_input_error("ids: empty batch");
  Tensor out = Tensor::zeros(Shape{B, L, dim});
  // Captures of every row, stacked on dim 0 once all rows ran.
  std::vector<std::string> order;
  std::vector<std::vector<Tensor>> rows;
  for (int64_t b = 0; b < B; ++b) {
    const CaptureFn row_capture =
        capture ? CaptureFn([&](const std::string& name, const Tensor& t) {
          if (name == "rel_buckets") {
            if (b == 0) capture(name, t);
            return;
          }
          if (b == 0) {
            order.push_back(name);
            rows.emplace_back();
          }
          const auto it = std::find(order.begin(), order.end(), name);
          rows[static_cast<size_t>(it - order.begin())].push_back(t.contiguous().clone());
        })
                : CaptureFn();
    try {
      const Tensor row = forward(ids.slice(0, b, b + 1), mask.slice(0, b, b + 1), row_capture);
      std::copy_n(row.data<float>(), L * dim, out.mutable_data<float>() + b * L * dim);
    } catch (const InputError& e) {
      throw_input_error("prompt ", b, " of ", B, ": ", e.what());
    }
  }
  for (size_t i = 0; i < order.size(); ++i) {
    const Tensor& first = rows[i].front();  // [1, ...]
    std::vector<int64_t> dims = first.shape().to_vector();
    dims[0] = B;
    Tensor stacked = Tensor::zeros(Shape(dims), first.dtype());
    const size_t bytes = first.nbytes();
    for (int64_t b = 0; b < B; ++b)
      std::memcpy(static_cast<std::byte*>(stacked.raw_mutable_data()) + b * bytes,
                  rows[i][static_cast<size_t>(b)].raw_data(), bytes);
    capture(order[i], stacked);
  }
  return out;
}

std::vector<Tensor> T5Encoder::encode_batch(const std::vector<TokenizedText>& texts) {
  std::vector<Tensor> contexts;
  contexts.reserve(texts.size());
  for (const TokenizedText& t : texts) contexts.push_back(encode(t));
  return contexts;
}

int64_t T5Encoder::weight_bytes(const T5Config& c, Precision precision) {
  const int64_t item = precision == Precision::kBF16 ? 2 : 4;
  // What the GEMMs hold (gemm.h); without AMX a bf16 GEMM also widens its weight per call into a
  // per-thread f32 scratch as large as the largest weight (added below).
  const int64_t gemm_item =
      gemm_weight_item_bytes(precision == Precision::kBF16 ? DType::kBF16 : DType::kF32);
  int64_t matrices = 0, small = 0, largest = 0;
  for (const TensorDecl& d : t5_tensor_decls(c)) {
    if (d.name == "token_embedding.weight" || d.role == TensorRole::kVector ||
        d.name.find("pos_embedding") != std::string::npos) {
      small += d.name == "token_embedding.weight" ? 0 : d.shape.numel() * 4;
    } else {
      matrices += d.shape.numel() * gemm_item;
      largest = std::max(largest, d.shape.numel());
    }
  }
  const int64_t widen_scratch =
      precision == Precision::kBF16 && gemm_widens_bf16() ? largest * 4 : 0;
  // + the fp32 path may keep a bf16 table
  return matrices + small + widen_scratch + c.vocab * c.dim * item;
}

int64_t T5Encoder::activation_bytes(const T5Config& c, int64_t L) {
  // x, act, tmp [L, dim]; qkv [L, 3 dim_attn]; attn [L, dim_attn]; ff [L, 2 dim_ffn];
  // hidden [L, dim_ffn]; bf16 copies of the GEMM inputs; bias [heads, 2L]; per-thread attention
  // buffers (K^T, V, scores); the output [L, dim].
  const int64_t f32 = L * (4 * c.dim + 4 * c.dim_attn + 3 * c.dim_ffn) + c.num_heads * 2 * L;
  const int64_t bf16 = L * (c.dim + c.dim_attn + c.dim_ffn);
  const int64_t per_thread = 2 * L * c.head_dim() + L + c.head_dim();
  return 4 * f32 + 2 * bf16 + 4 * per_thread * omp_get_max_threads();
}

double T5Encoder::forward_flops(const T5Config& c, int64_t L) {
  const double l = static_cast<double>(L);
  const double gemm = 2.0 * l * static_cast<double>(4 * c.dim * c.dim_attn + 3 * c.dim * c.dim_ffn);
  const double attention = 4.0 * l * l * static_cast<double>(c.dim_attn);
  return static_cast<double>(c.num_layers) * (gemm + attention);
}

}  // namespace vidax::wan
