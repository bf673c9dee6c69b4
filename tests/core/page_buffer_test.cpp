// PageBuffer: zero-initialised mapping; release_from() keeps every byte before the offset
// (including the partial page it ends in) and gives the whole pages after it back, which read
// as zeros again on Linux; moves transfer ownership.
#include "core/page_buffer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/memory_usage.h"

namespace vidax {
namespace {

TEST(PageBuffer, ZeroInitialisedAndReleaseKeepsThePrefix) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t bytes = 5 * page + 123;  // ragged: not a whole number of pages
  PageBuffer b(bytes);
  ASSERT_NE(b.data(), nullptr);
  ASSERT_EQ(b.size(), bytes);
  for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(b.data()[i], std::byte{0}) << i;
  std::memset(b.data(), 0x5a, bytes);
  const size_t keep = 2 * page + 17;  // ends inside page 2: that page must stay
  b.release_from(keep);
  for (size_t i = 0; i < 3 * page; ++i) ASSERT_EQ(b.data()[i], std::byte{0x5a}) << i;
#ifdef __linux__
  for (size_t i = 3 * page; i < bytes; ++i) ASSERT_EQ(b.data()[i], std::byte{0}) << i;
#endif
  // The released range stays usable.
  std::memset(b.data() + 3 * page, 0x11, bytes - 3 * page);
  EXPECT_EQ(b.data()[bytes - 1], std::byte{0x11});
  b.release_from(bytes);  // nothing after the end: a no-op
  b.release_from(0);      // everything
#ifdef __linux__
  EXPECT_EQ(b.data()[0], std::byte{0});
#endif
  PageBuffer moved(std::move(b));
  EXPECT_EQ(moved.size(), bytes);
  EXPECT_EQ(b.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  PageBuffer empty(0);
  EXPECT_EQ(empty.data(), nullptr);
  empty.release_from(0);
}

// The resident set follows pages written; the peak is at least where it has been.
TEST(MemoryUsage, ResidentSetFollowsWrittenPages) {
  const size_t before = resident_bytes();
  ASSERT_GT(before, 0u);
  PageBuffer b(size_t{32} << 20, PageBuffer::Init::kUndefined);
  std::memset(b.data(), 1, b.size());
  EXPECT_GE(resident_bytes(), before + (size_t{24} << 20));
  EXPECT_GE(peak_resident_bytes(), size_t{24} << 20);
}

// Under a PageReuse a freed buffer's mapping serves the next buffer of the same page-rounded
// size: kZeros reads zeros again, the counters say what happened, and the scope's end gives the
// kept mappings back.
TEST(PageReuse, AFreedMappingServesTheNextBufferOfItsSize) {
  PageReuse::set(true, 4);  // room for what this test keeps, whatever this process holds
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const PageReuse::Stats before = PageReuse::stats();
  {
    const PageReuse reuse;
    const std::byte* first = nullptr;
    {
      PageBuffer a(3 * page + 5);
      std::memset(a.data(), 0x7f, a.size());
      first = a.data();
    }
    EXPECT_EQ(PageReuse::stats().kept_bytes, 4 * page);
    PageBuffer b(4 * page);  // the same 4 pages
    EXPECT_EQ(b.data(), first);
    for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(b.data()[i], std::byte{0}) << i;
    std::memset(b.data(), 0x33, b.size());
    b = PageBuffer();
    PageBuffer c(4 * page, PageBuffer::Init::kUndefined);  // reused, not cleared
    EXPECT_EQ(c.data(), first);
    PageBuffer d(4 * page);  // nothing of that size is kept now: a new mapping
    EXPECT_NE(d.data(), first);
    const PageReuse::Stats in = PageReuse::stats();
    EXPECT_EQ(in.reused - before.reused, 2);
    EXPECT_EQ(in.mapped - before.mapped, 2);
    EXPECT_EQ(in.kept_bytes, 0u);
  }
  EXPECT_EQ(PageReuse::stats().kept_bytes, 0u);  // c and d were kept, then given back
  // Outside every scope nothing is kept.
  { PageBuffer e(page); }
  EXPECT_EQ(PageReuse::stats().kept_bytes, 0u);
  EXPECT_EQ(PageReuse::stats().reused, before.reused + 2);
  PageReuse::set(true, 0);
}

// At slack 0 a freed buffer is not kept when the resident set is above the process's peak at
// the scope's start (here: a buffer larger than that peak, written whole).
TEST(PageReuse, AFreeAboveTheLimitIsGivenBack) {
  PageReuse::set(true, 0);
  const size_t peak = peak_resident_bytes();
  const PageReuse reuse;  // the limit: at least this peak
  const size_t big = peak + (size_t{16} << 20);
  const int64_t given_back = PageReuse::stats().given_back;
  {
    PageBuffer b(big, PageBuffer::Init::kUndefined);
    std::memset(b.data(), 1, big);
  }
  EXPECT_EQ(PageReuse::stats().kept_bytes, 0u);
  EXPECT_EQ(PageReuse::stats().given_back, given_back + 1);
}

// A scope's end drops the releasable pages of buffers still alive (a VAE stream carried to the
// next call); the bytes before `keep` stay, and the buffer works as before under a later scope.
TEST(PageReuse, AScopeEndDropsReleasedPagesOfLiveBuffers) {
  PageReuse::set(true, 4);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  PageBuffer w(6 * page);
  {
    const PageReuse reuse;
    std::memset(w.data(), 0x5a, w.size());
    w.release_from(2 * page);
    EXPECT_EQ(PageReuse::stats().releasable_bytes, 4 * page);
  }
  EXPECT_EQ(PageReuse::stats().releasable_bytes, 0u);
  EXPECT_EQ(w.data()[2 * page - 1], std::byte{0x5a});
#ifdef __linux__
  EXPECT_EQ(w.data()[2 * page], std::byte{0});
#endif
  {
    const PageReuse reuse;
    w.take_back();
    std::memset(w.data() + 2 * page, 0x22, 4 * page);
    w.release_from(3 * page);
    EXPECT_EQ(PageReuse::stats().releasable_bytes, 3 * page);
    EXPECT_EQ(w.data()[3 * page], std::byte{0x22});  // kept while the scope lives
  }
  EXPECT_EQ(PageReuse::stats().releasable_bytes, 0u);
  PageReuse::set(true, 0);
}

// release_from() under a PageReuse keeps the pages (the bytes before `keep` intact) until room
// is needed; take_back() ends it. A buffer whose released pages were given back is not kept.
TEST(PageReuse, ReleasedPagesStayUntilRoomIsNeeded) {
  PageReuse::set(true, 4);  // room for what this test keeps, whatever this process holds
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const PageReuse reuse;
  PageBuffer w(8 * page);
  std::memset(w.data(), 0x5a, w.size());
  w.release_from(2 * page + 1);  // pages 3..7 releasable
  EXPECT_EQ(PageReuse::stats().releasable_bytes, 5 * page);
  for (size_t i = 0; i < 3 * page; ++i) ASSERT_EQ(w.data()[i], std::byte{0x5a}) << i;
  w.take_back();
  EXPECT_EQ(PageReuse::stats().releasable_bytes, 0u);
  std::memset(w.data(), 0x11, w.size());  // the whole buffer is the caller's again
  w.release_from(page);
  EXPECT_EQ(PageReuse::stats().releasable_bytes, 7 * page);
  // A mapping far larger than any resident set here: nothing fits under the limit, so every
  // kept mapping and releasable page is given back before it is made (it is never touched).
  { PageBuffer other(2 * page); }
  EXPECT_EQ(PageReuse::stats().kept_bytes, 2 * page);
  const int64_t given_back = PageReuse::stats().given_back;
  const size_t huge = (size_t{1} << 30) + 8 * peak_resident_bytes();
  PageBuffer big(huge, PageBuffer::Init::kUndefined);
  EXPECT_EQ(PageReuse::stats().kept_bytes, 0u);
  EXPECT_EQ(PageReuse::stats().releasable_bytes, 0u);
  EXPECT_EQ(PageReuse::stats().given_back, given_back + 2);
  for (size_t i = 0; i < page; ++i) ASSERT_EQ(w.data()[i], std::byte{0x11}) << i;
#ifdef __linux__
  EXPECT_EQ(w.data()[5 * page], std::byte{0});  // given back: zero pages again
#endif
  w.take_back();  // makes room for the pages it is about to write
  std::memset(w.data(), 0x22, w.size());
  w = PageBuffer();  // resident again: kept
  EXPECT_EQ(PageReuse::stats().kept_bytes, 8 * page);
  // One freed while its released pages are given back is unmapped, not kept: its next owner
  // would fault them in where no limit sees it.
  PageBuffer v(4 * page);
  std::memset(v.data(), 0x5a, v.size());
  v.release_from(page);
  big = PageBuffer();                                           // kept (never touched)
  big = PageBuffer(huge + page, PageBuffer::Init::kUndefined);  // a size not kept: room made
  EXPECT_EQ(PageReuse::stats().kept_bytes, 0u);
  v = PageBuffer();
  EXPECT_EQ(PageReuse::stats().kept_bytes, 0u);
  PageReuse::set(true, 0);
}

// Off: nothing is kept and release_from() drops the pages at once.
TEST(PageReuse, OffKeepsNothing) {
  PageReuse::set(false);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  {
    const PageReuse reuse;
    { PageBuffer a(page); }
    EXPECT_EQ(PageReuse::stats().kept_bytes, 0u);
    PageBuffer w(4 * page);
    std::memset(w.data(), 0x5a, w.size());
    w.release_from(page);
    EXPECT_EQ(PageReuse::stats().releasable_bytes, 0u);
#ifdef __linux__
    EXPECT_EQ(w.data()[2 * page], std::byte{0});
#endif
  }
  PageReuse::set(true, 0);
}

// Buffers made and freed on several threads under one scope: each sees its own bytes.
TEST(PageReuse, ThreadsShareThePool) {
  PageReuse::set(true, 4);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const PageReuse reuse;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, page] {
      for (int i = 0; i < 200; ++i) {
        const size_t n = (1 + static_cast<size_t>((i + t) % 3)) * page;
        PageBuffer b(n);
        ASSERT_EQ(b.data()[n - 1], std::byte{0});
        std::memset(b.data(), t + 1, n);
        ASSERT_EQ(b.data()[n / 2], static_cast<std::byte>(t + 1));
        if (i % 7 == 0) b.release_from(page / 2), b.take_back();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_GT(PageReuse::stats().reused, 0);
  PageReuse::set(true, 0);
}

}  // namespace
}  // namespace vidax
