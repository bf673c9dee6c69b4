#include "nn/conv3d.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/buffer.h"
#include "core/convert.h"
#include "core/thread_scratch.h"
#include "kernels/cpu/kernel_choices.h"
#include "kernels/cpu/onednn_bf16.h"

namespace vidax {
namespace {

using dnnl::memory;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

memory::data_type to_dnnl(DType d) {
  switch (d) {
    case DType::kF32:
      return memory::data_type::f32;
    case DType::kBF16:
      return memory::data_type::bf16;
    default:
      VIDAX_CHECK(false, "conv3d compute dtype must be F32 or BF16, got ", dtype_name(d));
  }
  return memory::data_type::undef;
}

}  // namespace

struct Conv3d::Impl {
  int64_t cin = 0, cout = 0;
  std::array<int64_t, 3> k{};
  Conv3dParams p;
  DType compute = DType::kF32;
  // BF16 compute where oneDNN has no bf16 convolution: the bf16 weights and inputs widened to
  // f32 (kernels/cpu/onednn_bf16.h), run by the f32 primitives.
  bool widened = false;
  Tensor bias;  // [C_out] f32 or undefined

  // The dtype oneDNN computes in.
  DType kernel_dtype() const { return widened ? DType::kF32 : compute; }

  struct Entry {
    dnnl::convolution_forward prim;
    dnnl::convolution_forward::primitive_desc pd;
    memory::desc weights_md;
    memory::desc src_md, dst_md;
  };
  struct Packed {
    memory::desc md;
    std::shared_ptr<Storage> data;
  };
  mutable std::mutex mu;
  mutable std::map<std::tuple<int64_t, int64_t, int64_t, bool>, Entry>
      cache;                          // (t, h, w, accumulate)
  mutable std::deque<Packed> packed;  // every layout a primitive asked for (stable refs)

  int64_t out_dim(int64_t in, int axis, int64_t pad_lo, int64_t pad_hi) const {
    return (in + pad_lo + pad_hi - k[static_cast<size_t>(axis)]) /
               p.stride[static_cast<size_t>(axis)] +
           1;
  }

  // oneDNN insists that padding_r matches the output extent exactly; trim the requested right
  // pad to what the (floored) output actually reads.
  int64_t effective_pad_hi(int64_t in, int axis, int64_t pad_lo, int64_t out) const {
    return (out - 1) * p.stride[static_cast<size_t>(axis)] + k[static_cast<size_t>(axis)] - in -
           pad_lo;
  }

  const Entry& entry(int64_t t, int64_t h, int64_t w, bool accumulate) const {
    std::lock_guard<std::mutex> lock(mu);
    auto key = std::make_tuple(t, h, w, accumulate);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    const int64_t to = out_dim(t, 0, 0, 0);
    const int64_t ho = out_dim(h, 1, p.pad_top, p.pad_bottom);
    const int64_t wo = out_dim(w, 2, p.pad_left, p.pad_right);
    VIDAX_CHECK(to >= 1 && ho >= 1 && wo >= 1, "conv3d: empty output for input ", t, "x", h, "x",
                w);
    memory::desc src({1, cin, t, h, w}, to_dnnl(kernel_dtype()), memory::format_tag::ndhwc);
    memory::desc dst({1, cout, to, ho, wo}, memory::data_type::f32, memory::format_tag::ndhwc);
    memory::desc wei({cout, cin, k[0], k[1], k[2]}, to_dnnl(kernel_dtype()),
                     memory::format_tag::any);
    const memory::dims strides = {p.stride[0], p.stride[1], p.stride[2]};
    const memory::dims pad_l = {0, p.pad_top, p.pad_left};
    const memory::dims pad_r = {0, effective_pad_hi(h, 1, p.pad_top, ho),
                                effective_pad_hi(w, 2, p.pad_left, wo)};
    // This oneDNN build gives every primitive its own scratchpad in library mode (concurrent
    // execution), a few MB each and dozens of primitives per model; the caller's thread-local
    // scratch (forward) is shared by all of them instead.
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    dnnl::convolution_forward::primitive_desc pd;
    if (bias.defined()) {
      memory::desc b({cout}, memory::data_type::f32, memory::format_tag::x);
      pd = {dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                            dnnl::algorithm::convolution_direct, src, wei, b, dst,
                                            strides, pad_l, pad_r),
            attr, cpu_engine()};
    } else {
      pd = {dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                            dnnl::algorithm::convolution_direct, src, wei, dst,
                                            strides, pad_l, pad_r),
            attr, cpu_engine()};
    }
    const memory::desc want = pd.weights_desc();
    bool have = false;
    for (const auto& pk : packed) have = have || pk.md == want;
    if (!have) {
      // Reorder from the first packed copy (any layout converts to any other).
      VIDAX_CHECK(!packed.empty(), "conv3d: no packed weight");
      Packed np{want, allocate_storage(want.get_size())};
      memory from(packed.front().md, cpu_engine(), packed.front().data->data());
      memory to_mem(want, cpu_engine(), np.data->data());
      dnnl::stream s(cpu_engine());
      dnnl::reorder(from, to_mem).execute(s, from, to_mem);
      s.wait();
      packed.push_back(std::move(np));
    }
    return cache.emplace(key, Entry{dnnl::convolution_forward(pd), pd, want, src, dst})
        .first->second;
  }

  const Packed& packed_for(const memory::desc& md) const {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& pk : packed)
      if (pk.md == md) return pk;
    VIDAX_CHECK(false, "conv3d: weight layout missing");
    return packed.front();
  }
};

Conv3d::Conv3d() = default;
Conv3d::Conv3d(Conv3d&&) noexcept = default;
Conv3d& Conv3d::operator=(Conv3d&&) noexcept = default;
Conv3d::~Conv3d() = default;

Conv3d::Conv3d(const Tensor& weight, const Tensor& bias, const Conv3dParams& params, DType compute)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  VIDAX_CHECK(weight.rank() == 5 || weight.rank() == 4, "conv3d weight must be 4-D or 5-D, got ",
              weight.describe());
  VIDAX_CHECK(compute == DType::kF32 || compute == DType::kBF16, "conv3d compute ",
              dtype_name(compute));
  m.cout = weight.dim(0);
  m.cin = weight.dim(1);
  m.k = weight.rank() == 5 ? std::array<int64_t, 3>{weight.dim(2), weight.dim(3), weight.dim(4)}
                           : std::array<int64_t, 3>{1, weight.dim(2), weight.dim(3)};
  m.p = params;
  m.compute = compute;
  m.widened = compute == DType::kBF16 && conv3d_widens_bf16();
  if (bias.defined()) {
    VIDAX_CHECK(bias.numel() == m.cout, "conv3d bias ", bias.describe(), " for weight ",
                weight.describe());
    m.bias = bias.to(DType::kF32);
  }
  // The plain weight in the compute dtype ("oidhw"), reordered into the layout oneDNN wants for
  // a representative input; other layouts are derived from that copy on demand.
  const Tensor plain =
      m.widened ? weight.to(DType::kBF16).to(DType::kF32) : weight.to(m.kernel_dtype());
  const memory::desc plain_md({m.cout, m.cin, m.k[0], m.k[1], m.k[2]}, to_dnnl(m.kernel_dtype()),
                              memory::format_tag::oidhw);
  const int64_t probe_t = m.k[0], probe_h = std::max<int64_t>(m.k[1], 16),
                probe_w = std::max<int64_t>(m.k[2], 16);
  {
    // Build a primitive descriptor only to learn the preferred weight layout.
    memory::desc wei({m.cout, m.cin, m.k[0], m.k[1], m.k[2]}, to_dnnl(m.kernel_dtype()),
                     memory::format_tag::any);
    memory::desc src({1, m.cin, probe_t, probe_h, probe_w}, to_dnnl(m.kernel_dtype()),
                     memory::format_tag::ndhwc);
    const int64_t ho = m.out_dim(probe_h, 1, m.p.pad_top, m.p.pad_bottom);
    const int64_t wo = m.out_dim(probe_w, 2, m.p.pad_left, m.p.pad_right);
    memory::desc dst({1, m.cout, 1, ho, wo}, memory::data_type::f32, memory::format_tag::ndhwc);
    dnnl::convolution_forward::primitive_desc pd(
        dnnl::convolution_forward::desc(
            dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, wei, dst,
            {m.p.stride[0], m.p.stride[1], m.p.stride[2]}, {0, m.p.pad_top, m.p.pad_left},
            {0, m.effective_pad_hi(probe_h, 1, m.p.pad_top, ho),
             m.effective_pad_hi(probe_w, 2, m.p.pad_left, wo)}),
        cpu_engine());
    Impl::Packed pk{pd.weights_desc(), allocate_storage(pd.weights_desc().get_size())};
    memory from(plain_md, cpu_engine(), const_cast<void*>(plain.raw_data()));
    memory to_mem(pk.md, cpu_engine(), pk.data->data());
    dnnl::stream s(cpu_engine());
    dnnl::reorder(from, to_mem).execute(s, from, to_mem);
    s.wait();
    m.packed.push_back(std::move(pk));
  }
}

int64_t Conv3d::in_channels() const { return impl_->cin; }
int64_t Conv3d::out_channels() const { return impl_->cout; }
std::array<int64_t, 3> Conv3d::kernel() const { return impl_->k; }
const Conv3dParams& Conv3d::params() const { return impl_->p; }
DType Conv3d::compute_dtype() const { return impl_->compute; }
bool Conv3d::widened() const { return impl_->widened; }

bool conv3d_widens_bf16() {
  // KernelChoices::conv_widened (VIDAX_CONV=widened) forces the widened path (tests run it on
  // every machine).
  return kernel_choices().conv_widened || !onednn_bf16_supported();
}

size_t Conv3d::weight_bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  size_t n = impl_->bias.defined() ? impl_->bias.nbytes() : 0;
  for (const auto& pk : impl_->packed) n += pk.md.get_size();
  return n;
}

int64_t Conv3d::out_frames(int64_t t_in) const { return impl_->out_dim(t_in, 0, 0, 0); }
int64_t Conv3d::out_height(int64_t h) const {
  return impl_->out_dim(h, 1, impl_->p.pad_top, impl_->p.pad_bottom);
}
int64_t Conv3d::out_width(int64_t w) const {
  return impl_->out_dim(w, 2, impl_->p.pad_left, impl_->p.pad_right);
}

void Conv3d::forward(const void* src, int64_t t_in, int64_t h, int64_t w, float* dst,
                     bool accumulate) const {
  VIDAX_CHECK(impl_ != nullptr, "forward on an empty Conv3d");
  const Impl::Entry& e = impl_->entry(t_in, h, w, accumulate);
  const Impl::Packed& wei = impl_->packed_for(e.weights_md);
  Buffer<float> widened;  // src [t_in, h, w, C_in] as f32 (the widened path only; per call)
  if (impl_->widened) {
    const size_t n = static_cast<size_t>(t_in * h * w * impl_->cin);
    widened.resize(n);
    convert_floats(src, DType::kBF16, widened.data(), DType::kF32, n);
    src = widened.data();
  }
  memory src_mem(e.src_md, cpu_engine(), const_cast<void*>(src));
  memory wei_mem(wei.md, cpu_engine(), wei.data->data());
  memory dst_mem(e.dst_md, cpu_engine(), dst);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, wei_mem}, {DNNL_ARG_DST, dst_mem}};
  if (impl_->bias.defined()) {
    memory::desc b({impl_->cout}, memory::data_type::f32, memory::format_tag::x);
    args.emplace(DNNL_ARG_BIAS, memory(b, cpu_engine(), const_cast<void*>(impl_->bias.raw_data())));
  }
  // One grow-only scratchpad per calling thread, shared by every primitive (a few MB).
  thread_local ThreadScratch<Buffer<std::byte>> scratch_holder;
  Buffer<std::byte>& scratch = scratch_holder.value;
  const memory::desc scratch_md = e.pd.scratchpad_desc();
  scratch.resize(std::max<size_t>(scratch_md.get_size(), 1));
  args.emplace(DNNL_ARG_SCRATCHPAD, memory(scratch_md, cpu_engine(), scratch.data()));
  dnnl::stream s(cpu_engine());
  e.prim.execute(s, args);
  s.wait();
}

std::string Conv3d::implementation(int64_t t_in, int64_t h, int64_t w) const {
  const Impl::Entry& e = impl_->entry(t_in, h, w, false);
  return e.pd.impl_info_str();
}

}  // namespace vidax
