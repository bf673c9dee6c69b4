// 64-byte aligned allocations, with transparent huge pages for large ones: from
// kHugePageMinBytes up, memory is 2 MiB aligned and marked MADV_HUGEPAGE before its first touch,
// so the kernel backs it with huge pages where it grants them only on request
// (/sys/kernel/mm/transparent_hugepage/enabled = madvise, Debian's default). Strided walks over
// wide rows (one head's 512 bytes of every 18 KB q|k|v row of a 32,760-token Wan layer) then
// stop paying a TLB miss per row (measured in docs/sparse-attention.md, "Cost of plan()").
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <new>

namespace vidax {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;
inline constexpr size_t kHugePageMinBytes = size_t{4} << 20;

// Release with std::free. Throws std::bad_alloc.
inline void* allocate_aligned(size_t bytes) {
  const bool huge = bytes >= kHugePageMinBytes;
  const size_t align = huge ? kHugePageBytes : 64;
  const size_t rounded = bytes == 0 ? align : (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (p == nullptr) throw std::bad_alloc();
  if (huge) ::madvise(p, rounded, MADV_HUGEPAGE);  // advice: refused, it stays 4 KiB pages
  return p;
}

}  // namespace vidax
