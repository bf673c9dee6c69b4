#include "kernels/cpu/cpu_features.h"

#include "kernels/cpu/kernel_choices.h"

#include <cstdlib>
#include <cstring>
#include <string_view>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace vidax {
namespace {

#if defined(__x86_64__)
bool cpuid_bit(unsigned leaf, unsigned subleaf, int reg, int bit) {
  unsigned r[4] = {0, 0, 0, 0};
  if (!__get_cpuid_count(leaf, subleaf, &r[0], &r[1], &r[2], &r[3])) return false;
  return ((r[reg] >> bit) & 1u) != 0;
}
enum { kEax = 0, kEbx = 1, kEcx = 2, kEdx = 3 };

bool cpu_is_amd() {
  unsigned r[4] = {0, 0, 0, 0};
  if (!__get_cpuid(0, &r[0], &r[1], &r[2], &r[3])) return false;
  char vendor[13] = {};
  std::memcpy(vendor, &r[kEbx], 4);  // the vendor string is EBX, EDX, ECX
  std::memcpy(vendor + 4, &r[kEdx], 4);
  std::memcpy(vendor + 8, &r[kEcx], 4);
  return std::string_view(vendor) == "AuthenticAMD";
}
#endif

}  // namespace

bool cpu_has_avx512f() {
#if defined(__x86_64__)
  static const bool has = cpuid_bit(7, 0, kEbx, 16);
  return has;
#else
  return false;
#endif
}

bool cpu_has_avx2_fma() {
#if defined(__x86_64__)
  static const bool has = cpuid_bit(7, 0, kEbx, 5) && cpuid_bit(1, 0, kEcx, 12);
  return has;
#else
  return false;
#endif
}

bool cpu_has_avx512_bf16() {
#if defined(__x86_64__)
  static const bool has = cpuid_bit(7, 1, kEax, 5);  // CPUID.(7,1):EAX[5]
  return has;
#else
  return false;
#endif
}

bool amx_bf16_usable() {
#if defined(__x86_64__) && defined(__linux__)
  static const bool ok = [] {
    const bool tile = cpuid_bit(7, 0, kEdx, 24), bf16 = cpuid_bit(7, 0, kEdx, 22);
    // AVX512-VBMI (byte permutes: the AMX kernel's fp8 widening) comes with every AMX CPU.
    const bool vbmi = cpuid_bit(7, 0, kEcx, 1);
    if (!tile || !bf16 || !vbmi || !cpu_has_avx512_bf16()) return false;
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return ok;
#else
  return false;
#endif
}

bool bf16_dot_product_fast() {
  static const bool fast = [] {
    if (!cpu_has_avx512_bf16() || amx_bf16_usable()) return false;
    if (kernel_choices().bf16_dot >= 0) return kernel_choices().bf16_dot == 1;  // VIDAX_BF16_DOT
#if defined(__x86_64__)
    return cpu_is_amd();
#else
    return false;
#endif
  }();
  return fast;
}

}  // namespace vidax
