#include "core/exec_context.h"

#include <cstdlib>
#include <string_view>

namespace vidax {

KernelChoices KernelChoices::from_environment() {
  KernelChoices k;
  if (const char* v = std::getenv("VIDAX_GEMM"); v != nullptr) k.gemm = v;
  if (const char* v = std::getenv("VIDAX_BF16_DOT"); v != nullptr) {
    if (std::string_view(v) == "0") k.bf16_dot = 0;
    if (std::string_view(v) == "1") k.bf16_dot = 1;
  }
  if (const char* v = std::getenv("VIDAX_CONV"); v != nullptr)
    k.conv_widened = std::string_view(v) == "widened";
  return k;
}

ExecContext ExecContext::from_environment() {
  ExecContext c;
  c.kernels = KernelChoices::from_environment();
  return c;
}

}  // namespace vidax
