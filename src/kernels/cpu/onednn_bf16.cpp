#include "kernels/cpu/onednn_bf16.h"

#include <oneapi/dnnl/dnnl.hpp>

namespace vidax {

bool onednn_bf16_supported() {
  static const bool supported = [] {
    using dnnl::memory;
    try {
      const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
      const auto bf16 = memory::data_type::bf16, f32 = memory::data_type::f32;
      // matmul [2, 2] x [2, 2] -> f32
      const memory::desc a({2, 2}, bf16, memory::format_tag::ab);
      const memory::desc c({2, 2}, f32, memory::format_tag::ab);
      const dnnl::matmul::primitive_desc mm(dnnl::matmul::desc(a, a, c), engine);
      // 3x3x3 convolution, 4 -> 4 channels, over a 3x4x4 volume -> 1x2x2
      const memory::desc src({1, 4, 3, 4, 4}, bf16, memory::format_tag::ndhwc);
      const memory::desc wei({4, 4, 3, 3, 3}, bf16, memory::format_tag::any);
      const memory::desc dst({1, 4, 1, 2, 2}, f32, memory::format_tag::ndhwc);
      const dnnl::convolution_forward::primitive_desc conv(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                          dnnl::algorithm::convolution_direct, src, wei, dst,
                                          {1, 1, 1}, {0, 0, 0}, {0, 0, 0}),
          engine);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return supported;
}

}  // namespace vidax
