// PageBuffer: zero-initialised mapping; release_from() keeps every byte before the offset
// (including the partial page it ends in) and gives the whole pages after it back, which read
// as zeros again on Linux; moves transfer ownership.
#include "core/page_buffer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

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

}  // namespace
}  // namespace vidax
