// PageBuffer: anonymous memory in its own mapping (page aligned) whose pages past some offset
// can be handed back to the operating system while the mapping and its contents before that
// offset stay. For buffers that are briefly larger than their steady state: the Wan VAE's causal
// convs keep 2 carried frames resident and append the new frame behind them only while the conv
// runs, so the conv reads one contiguous window without a staging copy. Released pages read as
// zeros again (Linux MADV_DONTNEED); callers must not rely on that.
//
// PageReuse: while one lives in the process, a freed PageBuffer keeps its mapping (resident) for
// the next PageBuffer of the same page-rounded size instead of unmapping it, and release_from()
// only marks its pages as releasable instead of dropping them, so a computation that makes the
// same buffers over and over (the VAE decoder, once per latent frame) stops paying a page fault
// and a kernel zeroing per 4 KiB and a TLB shootdown per unmap. What is kept is bounded: before a
// new mapping is made, before released pages that were given back are taken back, and after a
// buffer is kept, kept mappings and then releasable pages are given back, largest first, until
// the resident set plus the new size fits under the limit: the larger of the process's peak
// resident set when the first scope began and (1 + slack) x the peak of what the computation
// holds itself (the resident set less what is kept). Memory that is not a PageBuffer can grow
// between two checks, so the limit holds at the checks (docs/core.md). Slack 0 (the default)
// keeps the process near what its peak would be without reuse, and reuses freely where an
// earlier phase set a higher peak (a text encoder, a DiT); VIDAX_PAGE_REUSE=off|on|<slack> sets
// it (read once per process, at its first scope; another value is an error then). The last
// PageReuse to end gives everything kept back.
//
// PageBuffer is move-only and not thread-safe for concurrent release() / destruction of one
// buffer; different buffers, and PageReuse scopes, may be used from any threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace vidax {

class PageBuffer {
 public:
  // kZeros: every byte reads 0. kUndefined: contents unspecified (a reused mapping keeps what
  // its last owner wrote), for buffers the caller overwrites whole.
  enum class Init { kZeros, kUndefined };

  PageBuffer() = default;
  explicit PageBuffer(size_t bytes,
                      Init init = Init::kZeros);  // throws std::bad_alloc when mapping fails
  ~PageBuffer();
  PageBuffer(PageBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  PageBuffer& operator=(PageBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    return *this;
  }
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }

  // Drops the whole pages at or after byte `keep` from the resident set (the bytes before
  // `keep` are untouched; the partial page holding byte keep - 1 stays). The address range
  // stays valid. Under a PageReuse the pages are dropped later, when room is needed, or never:
  // call take_back() before writing past `keep` again (the bytes there are unspecified).
  void release_from(size_t keep);
  // Ends a release_from(): the whole buffer is the caller's again, nothing will drop its pages.
  void take_back();

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

class PageReuse {
 public:
  struct Stats {
    int64_t reused = 0;      // PageBuffers served from a kept mapping
    int64_t mapped = 0;      // PageBuffers that made a new mapping
    int64_t given_back = 0;  // kept mappings unmapped or releasable pages dropped, for the peak
    size_t kept_bytes = 0;   // kept mappings, now
    size_t releasable_bytes = 0;  // pages release_from() marked and nothing dropped yet, now
  };

  PageReuse();  // throws InputError for a malformed VIDAX_PAGE_REUSE
  ~PageReuse();
  PageReuse(const PageReuse&) = delete;
  PageReuse& operator=(const PageReuse&) = delete;

  // Counters since the process started.
  static Stats stats();
  // Overrides VIDAX_PAGE_REUSE for this process (off gives back everything kept now).
  static void set(bool on, double slack = 0);
};

}  // namespace vidax
