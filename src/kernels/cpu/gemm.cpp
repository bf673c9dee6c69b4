#include "kernels/cpu/gemm.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "core/convert.h"
#include "core/thread_scratch.h"
#include "kernels/cpu/amx_gemm.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/kernel_choices.h"
#include "kernels/cpu/onednn_bf16.h"

namespace vidax {
namespace {

using dnnl::memory;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// --- AMX path: BF16 compute on machines with usable AMX-BF16 runs our own kernel
// (kernels/cpu/amx_gemm.h) instead of oneDNN.
// KernelChoices::gemm (VIDAX_GEMM; read per construction): "onednn" forces oneDNN's bf16
// kernels, "widened" the widened path (below), anything else or unset picks by the machine.
std::string gemm_env() { return kernel_choices().gemm; }
bool use_amx_gemm(DType compute) {
  return compute == DType::kBF16 && amx_bf16_usable() && gemm_env() != "onednn" &&
         gemm_env() != "widened";
}
// --- Widened path: BF16 compute without AMX runs oneDNN's f32 GEMM on the bf16 values widened
// to f32 (exact: a product of two bf16 values is exact in f32, the sums are f32 either way).
// On Intel without AMX the f32 FMA rate is twice the vdpbf16ps rate (docs/benchmarks.md,
// `vidax bench peak`), as for the attention kernels' `widened` choice; where vdpbf16ps is the
// faster unit (bf16_dot_product_fast: AMD Zen 4+) oneDNN's own bf16 kernels run instead.
// VIDAX_GEMM=onednn where oneDNN has no bf16 matmul (onednn_bf16_supported) also runs widened.
bool use_widened_gemm(DType compute) {
  if (compute != DType::kBF16) return false;
  if (!onednn_bf16_supported()) return true;
  if (gemm_env() == "onednn") return false;
  if (gemm_env() == "widened") return true;
  return !amx_bf16_usable() && !bf16_dot_product_fast();
}
constexpr int64_t kWidenRows = 512;  // rows of x widened (and run) at a time

memory::data_type to_dnnl(DType d) {
  switch (d) {
    case DType::kF32:
      return memory::data_type::f32;
    case DType::kBF16:
      return memory::data_type::bf16;
    default:
      VIDAX_CHECK(false, "GEMM compute dtype must be F32 or BF16, got ", dtype_name(d));
  }
  return memory::data_type::undef;
}

}  // namespace

bool gemm_widens_bf16() { return use_widened_gemm(DType::kBF16); }
bool gemm_kept_widens_whole(DType compute) { return !use_amx_gemm(compute); }

int64_t gemm_weight_item_bytes(DType compute) { return compute == DType::kBF16 ? 2 : 4; }

struct PackedLinear::Impl {
  int64_t n = 0, k = 0;
  DType compute = DType::kF32;
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  Tensor plain_weight;  // [N, K] in compute dtype; released once packed
  Tensor bias;          // [N] f32 or undefined
  memory::desc packed_desc;
  // Weights in packed_desc layout; on the widened path the same layout's values held as bf16
  // (exact: they are bf16 values), widened into a per-thread f32 scratch at each call.
  std::shared_ptr<Storage> packed;
  struct Entry {
    dnnl::matmul prim;
  };
  mutable std::mutex mu;
  mutable std::map<std::pair<int64_t, bool>, Entry> cache;  // (M, bf16 output)
  std::unique_ptr<AmxPackedWeight> amx;                     // set: the AMX path, no oneDNN
  bool widened = false;  // BF16 compute through oneDNN f32 (use_widened_gemm)
  // Kept storage (PackedLinear::kept): the packed layout's elements as fp8 codes, one byte each
  // (or fp16 bits, two bytes each; `fp8_dtype` says which), in `codes` with `packed` empty
  // (oneDNN paths), or in `amx` (fp8 on the AMX path: amx_fp8).
  bool fp8 = false, amx_fp8 = false;
  DType fp8_dtype = DType::kF8E4M3;
  std::shared_ptr<Storage> codes;
  size_t code_count = 0;
  std::vector<float> column_scale, fp8_bias;  // [n]; fp8_bias empty without a bias
  GemmEpilogue fp8_epilogue = GemmEpilogue::kNone;
  // The dtype oneDNN computes in: f32 for the widened path.
  DType kernel_dtype() const { return widened ? DType::kF32 : compute; }

  memory::desc weight_desc_any() const {
    return memory::desc({k, n}, to_dnnl(kernel_dtype()), memory::format_tag::any);
  }

  dnnl::matmul::primitive_desc make_pd(int64_t m, bool bf16_out = false) const {
    memory::desc src({m, k}, to_dnnl(kernel_dtype()), memory::format_tag::ab);
    memory::desc dst({m, n}, bf16_out ? memory::data_type::bf16 : memory::data_type::f32,
                     memory::format_tag::ab);
    memory::desc wei = packed ? packed_desc : weight_desc_any();
    dnnl::primitive_attr attr;
    if (epilogue != GemmEpilogue::kNone) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.0f,
                         epilogue == GemmEpilogue::kGeluTanh ? dnnl::algorithm::eltwise_gelu_tanh
                                                             : dnnl::algorithm::eltwise_gelu_erf,
                         0.0f, 0.0f);
      attr.set_post_ops(ops);
    }
    if (bias.defined()) {
      memory::desc b({1, n}, memory::data_type::f32, memory::format_tag::ab);
      return {dnnl::matmul::desc(src, wei, b, dst), attr, cpu_engine()};
    }
    return {dnnl::matmul::desc(src, wei, dst), attr, cpu_engine()};
  }

  // Packs the plain weight into the layout the primitive for `m` rows wants.
  void pack(const dnnl::matmul::primitive_desc& pd) {
    packed_desc = pd.weights_desc();
    packed = allocate_storage(packed_desc.get_size());
    // The plain [N, K] row-major weight is the [K, N] matrix in "ba" order.
    memory::desc plain({k, n}, to_dnnl(kernel_dtype()), memory::format_tag::ba);
    memory src_mem(plain, cpu_engine(), const_cast<void*>(plain_weight.raw_data()));
    memory dst_mem(packed_desc, cpu_engine(), packed->data());
    dnnl::stream s(cpu_engine());
    dnnl::reorder(src_mem, dst_mem).execute(s, src_mem, dst_mem);
    s.wait();
    plain_weight = Tensor();
    if (widened) {
      // Keep the packed f32 layout's values as bf16: half the weight memory.
      const size_t elems = packed_desc.get_size() / sizeof(float);
      auto narrow = allocate_storage(elems * sizeof(BFloat16));
      convert_floats(packed->data(), DType::kF32, narrow->data(), DType::kBF16, elems);
      packed = std::move(narrow);
    }
  }
};

PackedLinear::PackedLinear(const Tensor& weight, const Tensor& bias, DType compute,
                           GemmEpilogue epilogue)
    : impl_(std::make_unique<Impl>()) {
  VIDAX_CHECK(weight.rank() == 2, "linear weight must be [N, K], got ", weight.describe());
  impl_->n = weight.dim(0);
  impl_->k = weight.dim(1);
  impl_->compute = compute;
  impl_->epilogue = epilogue;
  if (use_amx_gemm(compute)) {
    VIDAX_CHECK(!bias.defined() || bias.numel() == impl_->n, "bias ", bias.describe(),
                " for weight ", weight.describe());
    impl_->amx = std::make_unique<AmxPackedWeight>(weight, bias);
    return;
  }
  impl_->plain_weight = weight.dtype() == compute ? weight.contiguous() : weight.to(compute);
  if (use_widened_gemm(compute)) {
    impl_->widened = true;  // the bf16 values, widened
    impl_->plain_weight = impl_->plain_weight.to(DType::kF32);
  }
  if (bias.defined()) {
    VIDAX_CHECK(bias.numel() == impl_->n, "bias ", bias.describe(), " for weight ",
                weight.describe());
    impl_->bias = bias.dtype() == DType::kF32 ? bias.contiguous() : bias.to(DType::kF32);
  }
  // Pack for a representative M; the packed layout does not depend on M in practice. If a
  // later primitive wants a different layout we repack from a plain copy (see forward()).
  impl_->pack(impl_->make_pd(256));
}

namespace {

// The `count` elements of a packed buffer in `dtype` (bf16 or f32) holding integer values (fp8
// codes 0..255, or fp16 bit patterns 0..65535 in f32, packed as numbers), as codes of type T.
template <typename T>
void integers_to_codes(const void* packed, DType dtype, size_t count, T* codes) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) {
    const float v = dtype == DType::kF32 ? static_cast<const float*>(packed)[i]
                                         : bf16_to_f32(static_cast<const uint16_t*>(packed)[i]);
    codes[i] = static_cast<T>(v);
  }
}

}  // namespace

PackedLinear PackedLinear::kept(const Tensor& codes_in, std::vector<float> column_scale,
                                const Tensor& bias, DType compute, GemmEpilogue epilogue) {
  const bool f16 = codes_in.dtype() == DType::kF16;
  VIDAX_CHECK(codes_in.rank() == 2 &&
                  (f16 || codes_in.dtype() == DType::kF8E4M3 || codes_in.dtype() == DType::kF8E5M2),
              "kept linear weight must be [N, K] F8 or F16, got ", codes_in.describe());
  if (f16 && compute != DType::kF32)  // (callers check: open_dit, WanDit)
    VIDAX_INTERNAL_ERROR("fp16 weights are kept for f32 compute only (bf16 holds them at the ",
                         "same size)");
  const int64_t n = codes_in.dim(0), k = codes_in.dim(1);
  VIDAX_CHECK(static_cast<int64_t>(column_scale.size()) == n, "fp8 linear: ", column_scale.size(),
              " column scales for ", n, " outputs");
  VIDAX_CHECK(!bias.defined() || bias.numel() == n, "bias ", bias.describe(), " for [", n, ", ", k,
              "]");
  const Tensor codes = codes_in.contiguous();
  const auto* code_bytes = static_cast<const uint8_t*>(codes.raw_data());
  const auto* code_halves = static_cast<const uint16_t*>(codes.raw_data());
  PackedLinear out;
  out.impl_ = std::make_unique<Impl>();
  Impl& im = *out.impl_;
  im.n = n;
  im.k = k;
  im.compute = compute;
  im.fp8 = true;
  im.fp8_dtype = codes.dtype();
  im.column_scale = std::move(column_scale);
  if (bias.defined()) im.fp8_bias = bias.to_float_vector();
  im.fp8_epilogue = epilogue;
  // AMX: the codes in the kernel's panel layout (AmxPackedWeight::fp8). oneDNN: the codes as
  // numbers (0..255, or fp16 bits 0..65535 in f32: exact) packed by oneDNN, then read back as
  // codes: the packed layout at one (two) bytes per element.
  if (use_amx_gemm(compute)) {  // our kernel widens per tile and scales in its epilogue
    im.amx_fp8 = true;
    im.code_count = AmxPackedWeight::packed_elements(n, k);
    im.amx = std::make_unique<AmxPackedWeight>(
        AmxPackedWeight::fp8(code_bytes, codes.dtype(), n, k, im.column_scale,
                             im.fp8_bias.empty() ? nullptr : im.fp8_bias.data()));
    return out;
  }
  im.widened = use_widened_gemm(compute);
  const DType kernel = im.kernel_dtype();
  Tensor values = Tensor::zeros(Shape{n, k}, kernel);
  if (kernel == DType::kF32) {
    float* v = values.mutable_data<float>();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n * k; ++i)
      v[i] = static_cast<float>(f16 ? code_halves[i] : code_bytes[i]);  // exact in f32
  } else {
    auto* v = values.mutable_data<BFloat16>();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n * k; ++i)
      v[i] = BFloat16{f32_to_bf16(static_cast<float>(code_bytes[i]))};
  }
  im.plain_weight = values;
  im.pack(im.make_pd(256));  // (the widened path narrows its packed f32 to bf16: still exact)
  const DType stored = im.widened ? DType::kBF16 : kernel;
  im.code_count = im.packed_desc.get_size() / dtype_size(kernel);
  im.codes = allocate_storage(im.code_count * dtype_size(im.fp8_dtype));
  if (f16) {
    integers_to_codes(im.packed->data(), stored, im.code_count,
                      reinterpret_cast<uint16_t*>(im.codes->data()));
  } else {
    integers_to_codes(im.packed->data(), stored, im.code_count,
                      reinterpret_cast<uint8_t*>(im.codes->data()));
  }
  im.packed.reset();
  return out;
}

bool PackedLinear::is_kept() const { return impl_ != nullptr && impl_->fp8; }

PackedLinear::PackedLinear() = default;
PackedLinear::PackedLinear(PackedLinear&&) noexcept = default;
PackedLinear& PackedLinear::operator=(PackedLinear&&) noexcept = default;
PackedLinear::~PackedLinear() = default;

int64_t PackedLinear::in_features() const { return impl_->k; }
int64_t PackedLinear::out_features() const { return impl_->n; }
GemmEpilogue PackedLinear::epilogue() const {
  return impl_->fp8 ? impl_->fp8_epilogue : impl_->epilogue;
}

const AmxPackedWeight* PackedLinear::amx_weight() const {
  return impl_ && !impl_->fp8 ? impl_->amx.get() : nullptr;
}

DType PackedLinear::compute_dtype() const { return impl_->compute; }
size_t PackedLinear::packed_bytes() const {
  if (impl_->fp8) return impl_->code_count * dtype_size(impl_->fp8_dtype);
  if (impl_->amx) return impl_->amx->packed_bytes();
  return impl_->widened ? impl_->packed_desc.get_size() / 2 : impl_->packed_desc.get_size();
}

void PackedLinear::forward(const void* x, int64_t m, float* y) const { run(x, m, y, false); }

void PackedLinear::forward_bf16_out(const void* x, int64_t m, BFloat16* y) const {
  run(x, m, y, true);
}

void PackedLinear::run(const void* x, int64_t m, void* y, bool bf16_out) const {
  VIDAX_CHECK(impl_ != nullptr, "forward on an empty PackedLinear");
  if (m == 0) return;
  Impl& im = *impl_;
  if (im.fp8) return run_fp8(x, m, y, bf16_out);
  if (im.amx) {
    const auto* xb = static_cast<const BFloat16*>(x);
    if (bf16_out) {
      amx_gemm_bf16(xb, m, im.k, *im.amx, static_cast<BFloat16*>(y), im.epilogue);
    } else {
      amx_gemm_bf16(xb, m, im.k, *im.amx, static_cast<float*>(y), im.epilogue);
    }
    return;
  }
  if (im.widened) {
    // The weight is widened once per call into a per-thread f32 scratch (the largest weight
    // this thread has run), then run_widened.
    thread_local ThreadScratch<std::vector<float>> ws_scratch;
    std::vector<float>& ws = ws_scratch.value;
    const size_t weight_elems = im.packed_desc.get_size() / sizeof(float);
    if (ws.size() < weight_elems) ws.resize(weight_elems);
    convert_floats(im.packed->data(), DType::kBF16, ws.data(), DType::kF32, weight_elems);
    run_widened(x, m, y, bf16_out, ws.data());
    return;
  }
  execute(x, m, y, bf16_out, im.packed->data());
}

void PackedLinear::run_widened(const void* x, int64_t m, void* y, bool bf16_out,
                               const float* weights) const {
  // x [m, k] bf16 kWidenRows rows at a time, run in f32; a bf16 output is rounded from an f32
  // scratch after the epilogue, as oneDNN does.
  const Impl& im = *impl_;
  thread_local ThreadScratch<std::vector<float>> xs_scratch, ys_scratch;
  std::vector<float>& xs = xs_scratch.value;
  std::vector<float>& ys = ys_scratch.value;
  auto* w = const_cast<float*>(weights);
  const auto* xb = static_cast<const BFloat16*>(x);
  for (int64_t r0 = 0; r0 < m; r0 += kWidenRows) {
    const int64_t rows = std::min(kWidenRows, m - r0);
    xs.resize(static_cast<size_t>(rows * im.k));
    convert_floats(xb + r0 * im.k, DType::kBF16, xs.data(), DType::kF32, xs.size());
    if (bf16_out) {
      ys.resize(static_cast<size_t>(rows * im.n));
      execute(xs.data(), rows, ys.data(), false, w);
      convert_floats(ys.data(), DType::kF32, static_cast<BFloat16*>(y) + r0 * im.n, DType::kBF16,
                     ys.size());
    } else {
      execute(xs.data(), rows, static_cast<float*>(y) + r0 * im.n, false, w);
    }
  }
}

void PackedLinear::run_fp8(const void* x, int64_t m, void* y, bool bf16_out) const {
  const Impl& im = *impl_;
  if (im.amx_fp8) {  // widened per tile, scale, bias and activation in the kernel's epilogue
    const auto* xb = static_cast<const BFloat16*>(x);
    if (bf16_out) {
      amx_gemm_bf16(xb, m, im.k, *im.amx, static_cast<BFloat16*>(y), im.fp8_epilogue);
    } else {
      amx_gemm_bf16(xb, m, im.k, *im.amx, static_cast<float*>(y), im.fp8_epilogue);
    }
    return;
  }
  // 1. The codes widened into this thread's scratch (the largest fp8 weight it has run), in the
  //    dtype the kernel reads: bf16 for oneDNN's bf16 kernels, f32 otherwise.
  const DType wide = im.kernel_dtype();
  thread_local ThreadScratch<std::shared_ptr<Storage>> weight_scratch;
  thread_local ThreadScratch<std::vector<float>> out_scratch;
  std::shared_ptr<Storage>& ws = weight_scratch.value;
  const size_t bytes = im.code_count * dtype_size(wide);
  if (!ws || ws->bytes() < bytes) ws = allocate_storage(bytes);
  convert_floats(im.codes->data(), im.fp8_dtype, ws->data(), wide, im.code_count);  // OpenMP
  // 2. The GEMM without bias or activation, into f32.
  float* out = static_cast<float*>(y);
  if (bf16_out) {
    out_scratch.value.resize(static_cast<size_t>(m * im.n));
    out = out_scratch.value.data();
  }
  if (im.widened) {
    run_widened(x, m, out, false, reinterpret_cast<const float*>(ws->data()));
  } else {
    execute(x, m, out, false, ws->data());
  }
  // 3. Per-column scale and bias, then the activation, then the output dtype.
  const float* scale = im.column_scale.data();
  const float* bias = im.fp8_bias.empty() ? nullptr : im.fp8_bias.data();
  const int64_t n = im.n;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < m; ++r) {
    float* row = out + r * n;
    if (bias != nullptr) {
      for (int64_t j = 0; j < n; ++j) row[j] = row[j] * scale[j] + bias[j];
    } else {
      for (int64_t j = 0; j < n; ++j) row[j] *= scale[j];
    }
  }
  if (im.fp8_epilogue == GemmEpilogue::kGeluTanh) gelu_tanh(out, out, m * n);
  if (im.fp8_epilogue == GemmEpilogue::kGeluErf) gelu_erf(out, out, m * n);
  if (bf16_out) convert_floats(out, DType::kF32, y, DType::kBF16, static_cast<size_t>(m * n));
}

void PackedLinear::execute(const void* x, int64_t m, void* y, bool bf16_out, void* weights) const {
  Impl& im = *impl_;
  dnnl::matmul prim;
  {
    std::lock_guard<std::mutex> lock(im.mu);
    auto it = im.cache.find({m, bf16_out});
    if (it == im.cache.end()) {
      auto pd = im.make_pd(m, bf16_out);
      // make_pd fixes the weight layout to packed_desc; oneDNN refuses (throws) if it cannot
      // run with it, which would be a bug in our assumption above.
      VIDAX_CHECK(pd.weights_desc() == im.packed_desc, "oneDNN wants another weight layout");
      it = im.cache.emplace(std::make_pair(m, bf16_out), Impl::Entry{dnnl::matmul(pd)}).first;
    }
    prim = it->second.prim;
  }
  memory::desc src_d({m, im.k}, to_dnnl(im.kernel_dtype()), memory::format_tag::ab);
  memory::desc dst_d({m, im.n}, bf16_out ? memory::data_type::bf16 : memory::data_type::f32,
                     memory::format_tag::ab);
  memory src(src_d, cpu_engine(), const_cast<void*>(x));
  memory wei(im.packed_desc, cpu_engine(), weights);
  memory dst(dst_d, cpu_engine(), y);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
  if (im.bias.defined()) {
    memory::desc b_d({1, im.n}, memory::data_type::f32, memory::format_tag::ab);
    args.emplace(DNNL_ARG_BIAS, memory(b_d, cpu_engine(), const_cast<void*>(im.bias.raw_data())));
  }
  dnnl::stream s(cpu_engine());
  prim.execute(s, args);
  s.wait();
}

Tensor PackedLinear::operator()(const Tensor& x) const {
  VIDAX_CHECK(x.rank() >= 1 && x.dim(-1) == in_features(), "linear input ", x.describe(),
              " for K=", in_features());
  const int64_t m = x.numel() / in_features();
  Tensor in = x.dtype() == impl_->compute ? x.contiguous() : x.to(impl_->compute);
  std::vector<int64_t> dims = x.shape().to_vector();
  dims.back() = out_features();
  Tensor out = Tensor::zeros(Shape(dims), DType::kF32);
  forward(in.raw_data(), m, out.mutable_data<float>());
  return out;
}

}  // namespace vidax
