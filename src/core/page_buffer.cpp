#include "core/page_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <new>
#include <string_view>

#include "core/error.h"
#include "core/memory_usage.h"

namespace vidax {
namespace {

size_t page_size() {
  static const size_t n = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return n;
}

size_t round_to_pages(size_t bytes) {
  const size_t page = page_size();
  return (bytes + page - 1) / page * page;
}

// VIDAX_PAGE_REUSE: "off", "on" (the default: slack 0) or the slack as a fraction. Returns
// false for a value that is none of these.
bool parse_reuse_setting(const char* v, bool& enabled, double& slack) {
  enabled = true;
  slack = 0;
  if (v == nullptr || std::string_view(v) == "on") return true;
  if (std::string_view(v) == "off") {
    enabled = false;
    return true;
  }
  char* end = nullptr;
  const double f = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(f >= 0 && f <= 4)) return false;
  slack = f;
  return true;
}

void unmap(void* p, size_t bytes) { ::munmap(p, bytes); }

void drop_pages(std::byte* p, size_t bytes) { ::madvise(p, bytes, MADV_DONTNEED); }

// The kept mappings, by page-rounded size, and the releasable page ranges, by buffer.
struct Pool {
  struct Range {
    size_t begin = 0, end = 0;  // page-aligned offsets into the buffer's mapping
    bool dropped = false;       // given back: writing there faults pages in again
  };
  std::mutex mu;
  int scopes = 0;
  bool enabled = true, setting_checked = false;
  std::multimap<size_t, void*> kept;
  std::map<std::byte*, Range> releasable;
  PageReuse::Stats stats;
  // The limit on the resident set while something is kept: the larger of the process's peak
  // when reuse began and (1 + slack) x the peak of what the computation itself holds (the
  // resident set less what is kept).
  size_t floor = 0, own_peak = 0;
  double slack = 0;

  bool active() const { return scopes > 0 && enabled; }

  // Forgets `data`'s releasable range (its pages stay as they are). Returns the bytes of it
  // that were given back (0 when none or still resident).
  size_t forget(std::byte* data) {
    auto it = releasable.find(data);
    if (it == releasable.end()) return 0;
    const size_t n = it->second.end - it->second.begin;
    const bool dropped = it->second.dropped;
    releasable.erase(it);
    if (dropped) return n;
    stats.releasable_bytes -= n;
    return 0;
  }

  // Gives back kept mappings, then releasable pages, largest first, one at a time, until the
  // resident set (read again after each: a kept mapping may not be resident whole) plus `bytes`
  // fits under the limit or nothing is left to give.
  void make_room(size_t bytes) {
    for (;;) {
      const size_t rss = resident_bytes();
      const size_t pooled = stats.kept_bytes + stats.releasable_bytes;
      own_peak = std::max(own_peak, rss > pooled ? rss - pooled : 0);
      const size_t limit =
          std::max(floor, static_cast<size_t>(static_cast<double>(own_peak) * (1.0 + slack)));
      if (rss + bytes <= limit || !give_back_largest()) return;
    }
  }

  // Unmaps the largest kept mapping, or else drops the largest releasable range. False when
  // there is nothing to give.
  bool give_back_largest() {
    if (!kept.empty()) {
      auto largest = std::prev(kept.end());
      unmap(largest->second, largest->first);
      stats.kept_bytes -= largest->first;
      kept.erase(largest);
      stats.given_back++;
      return true;
    }
    auto largest = releasable.end();
    size_t n = 0;
    for (auto it = releasable.begin(); it != releasable.end(); ++it) {
      const size_t len = it->second.end - it->second.begin;
      if (!it->second.dropped && len > n) largest = it, n = len;
    }
    if (largest == releasable.end()) return false;
    drop_pages(largest->first + largest->second.begin, n);
    largest->second.dropped = true;  // kept on record: take_back() makes room for it
    stats.releasable_bytes -= n;
    stats.given_back++;
    return true;
  }

  // Gives everything back (the last scope ended, or reuse was turned off). The ranges of buffers
  // still alive (a VAE stream carried to the next call) stay on record as given back, so that
  // their take_back() under a later scope makes room before the pages fault in again.
  void drop_all() {
    for (auto& [bytes, p] : kept) unmap(p, bytes);
    kept.clear();
    for (auto& [data, r] : releasable) {
      if (!r.dropped) drop_pages(data + r.begin, r.end - r.begin);
      r.dropped = true;
    }
    stats.kept_bytes = 0;
    stats.releasable_bytes = 0;
  }
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: PageBuffers may outlive static destructors
  return *p;
}

// A mapping of `rounded` bytes: a kept one of that size, else a new one (first making room
// under the peak). Sets `fresh` when it is a new mapping.
void* take_mapping(size_t rounded, bool& fresh) {
  Pool& pl = pool();
  {
    std::lock_guard<std::mutex> lock(pl.mu);
    if (pl.active()) {
      auto it = pl.kept.find(rounded);
      if (it != pl.kept.end()) {
        void* p = it->second;
        pl.kept.erase(it);
        pl.stats.kept_bytes -= rounded;
        pl.stats.reused++;
        fresh = false;
        return p;
      }
      pl.make_room(rounded);
    }
    pl.stats.mapped++;
  }
  void* p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  fresh = true;
  return p;
}

}  // namespace

PageBuffer::PageBuffer(size_t bytes, Init init) {
  if (bytes == 0) return;
  bool fresh = true;
  data_ = static_cast<std::byte*>(take_mapping(round_to_pages(bytes), fresh));
  size_ = bytes;
  if (!fresh && init == Init::kZeros) std::memset(data_, 0, bytes);
}

PageBuffer::~PageBuffer() {
  if (data_ == nullptr) return;
  const size_t rounded = round_to_pages(size_);
  {
    Pool& pl = pool();
    std::lock_guard<std::mutex> lock(pl.mu);
    // Kept whole when resident (its releasable pages too); one with pages given back would
    // fault them in again unseen when reused: unmapped. Keeping it changes nothing resident,
    // but what is not a PageBuffer (the heap, a decoded video) grows meanwhile: the limit is
    // checked again, and the largest kept mapping (perhaps this one) goes first.
    if (pl.forget(data_) == 0 && pl.active()) {
      pl.kept.emplace(rounded, data_);
      pl.stats.kept_bytes += rounded;
      pl.make_room(0);
      return;
    }
  }
  unmap(data_, rounded);
}

void PageBuffer::release_from(size_t keep) {
  const size_t page = page_size();
  const size_t begin = (keep + page - 1) / page * page;
  const size_t end = round_to_pages(size_);
  if (data_ == nullptr || begin >= end) return;
  Pool& pl = pool();
  std::lock_guard<std::mutex> lock(pl.mu);
  pl.forget(data_);
  if (!pl.active()) {
    drop_pages(data_ + begin, end - begin);
    return;
  }
  pl.releasable[data_] = Pool::Range{begin, end};
  pl.stats.releasable_bytes += end - begin;
}

void PageBuffer::take_back() {
  if (data_ == nullptr) return;
  Pool& pl = pool();
  std::lock_guard<std::mutex> lock(pl.mu);
  const size_t dropped = pl.forget(data_);
  if (dropped > 0 && pl.active()) pl.make_room(dropped);  // the caller faults them in next
}

PageReuse::PageReuse() {
  Pool& pl = pool();
  std::lock_guard<std::mutex> lock(pl.mu);
  if (!pl.setting_checked) {
    const char* v = std::getenv("VIDAX_PAGE_REUSE");
    if (!parse_reuse_setting(v, pl.enabled, pl.slack))
      throw_input_error("VIDAX_PAGE_REUSE: expected off, on or a fraction in [0, 4], got '", v,
                        "'");
    pl.setting_checked = true;
  }
  if (pl.scopes++ == 0) pl.floor = peak_resident_bytes();
}

PageReuse::~PageReuse() {
  Pool& pl = pool();
  std::lock_guard<std::mutex> lock(pl.mu);
  if (--pl.scopes == 0) pl.drop_all();
  if (pl.scopes == 0) pl.own_peak = 0;
}

PageReuse::Stats PageReuse::stats() {
  Pool& pl = pool();
  std::lock_guard<std::mutex> lock(pl.mu);
  return pl.stats;
}

void PageReuse::set(bool on, double slack) {
  Pool& pl = pool();
  std::lock_guard<std::mutex> lock(pl.mu);
  pl.setting_checked = true;
  pl.enabled = on;
  pl.slack = slack;
  if (!on) pl.drop_all();
}

}  // namespace vidax
