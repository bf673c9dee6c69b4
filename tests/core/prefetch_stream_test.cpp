// PrefetchStream: every item handed out is the one asked for, in any order of use; at most
// pinned + window items exist at a time; loads run ahead of use; a failing load is rethrown
// to the acquire that needs it and the stream recovers.
#include "core/prefetch_stream.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace vidax {
namespace {

struct Item {
  Item(int i, std::atomic<int>& live) : index(i), live(live) { max_live(live.fetch_add(1) + 1); }
  ~Item() { live.fetch_sub(1); }
  static void max_live(int n) {
    int m = peak.load();
    while (n > m && !peak.compare_exchange_weak(m, n)) {
    }
  }
  int index;
  std::atomic<int>& live;
  static std::atomic<int> peak;
};
std::atomic<int> Item::peak{0};

// Three passes in the order of use load every pinned item once and every streamed one once a
// pass, never more than pinned + window at a time. What the loader fetches ahead for a fourth
// pass depends on timing (the caller may read the counters before or after it lands), so the
// loads are counted per item after the stream is gone: the first `window` streamed items may have
// one more load, the others none; with `finish_due_loads` that one more load is always done.
TEST(PrefetchStream, CyclicUseStaysWithinTheWindow) {
  constexpr int kItems = 7, kPasses = 3;
  for (bool finish_due_loads : {false, true}) {
    for (int pinned : {0, 1, 3}) {
      for (int window : {1, 2, 3}) {
        const std::string where = "pinned " + std::to_string(pinned) + " window " +
                                  std::to_string(window) + " finish " +
                                  std::to_string(finish_due_loads);
        std::atomic<int> live{0};
        std::vector<std::atomic<int>> loads(kItems);
        Item::peak = 0;
        int64_t loads_seen_in_use = 0;
        {
          PrefetchStream<Item> s(
              kItems, pinned, window,
              [&](int i) {
                std::this_thread::sleep_for(std::chrono::microseconds(200));
                loads[static_cast<size_t>(i)].fetch_add(1);
                return std::make_unique<Item>(i, live);
              },
              1, finish_due_loads);
          for (int pass = 0; pass < kPasses; ++pass) {
            for (int i = 0; i < kItems; ++i) {
              EXPECT_EQ(s.acquire(i).index, i) << where;
              s.release(i);
            }
          }
          loads_seen_in_use = s.stats().loads;
          EXPECT_EQ(s.stats().uses, kPasses * (kItems - pinned)) << where;
        }
        int64_t total = 0;
        for (int i = 0; i < kItems; ++i) {
          const int n = loads[static_cast<size_t>(i)].load();
          total += n;
          const int ahead = i - pinned;  // the item's place among the streamed ones
          if (i < pinned) {
            EXPECT_EQ(n, 1) << where << " item " << i;
          } else if (ahead >= window || (!finish_due_loads && n == kPasses)) {
            EXPECT_EQ(n, kPasses) << where << " item " << i;
          } else {
            EXPECT_EQ(n, kPasses + 1) << where << " item " << i;
            // Loaded ahead in order: the streamed items before it were loaded ahead too.
            if (ahead > 0) {
              EXPECT_EQ(loads[static_cast<size_t>(i - 1)].load(), kPasses + 1) << where;
            }
          }
        }
        EXPECT_GE(loads_seen_in_use, pinned + kPasses * (kItems - pinned)) << where;
        EXPECT_LE(loads_seen_in_use, total) << where;
        EXPECT_LE(Item::peak.load(), pinned + window) << where;
        EXPECT_EQ(live.load(), 0) << where;
      }
    }
  }
}

TEST(PrefetchStream, AllPinnedLoadsOnceWithoutAThread) {
  std::atomic<int> live{0};
  int loads = 0;
  PrefetchStream<Item> s(4, 4, 0, [&](int i) {
    ++loads;
    return std::make_unique<Item>(i, live);
  });
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < 4; ++i) EXPECT_EQ(s.acquire(i).index, i), s.release(i);
  EXPECT_EQ(loads, 4);
  EXPECT_EQ(s.pinned_item(2).index, 2);
}

TEST(PrefetchStream, OutOfOrderUseRestartsTheLoader) {
  std::atomic<int> live{0};
  PrefetchStream<Item> s(6, 1, 2, [&](int i) { return std::make_unique<Item>(i, live); });
  // A forward that stops after block 2, then one from the start, then jumps.
  for (int i : {0, 1, 2, 0, 1, 2, 3, 4, 5, 4, 1, 5, 3}) {
    EXPECT_EQ(s.acquire(i).index, i);
    s.release(i);
  }
}

// The loader fills its window with the next items; the caller then skips them and asks for the
// item the loader would load next: the stream must not wait for a slot that never frees (it
// drops what was loaded ahead instead). Whatever the timing, the answer is the item asked for.
TEST(PrefetchStream, SkippingAFullWindowDoesNotHang) {
  std::atomic<int> live{0};
  PrefetchStream<Item> s(6, 0, 2, [&](int i) { return std::make_unique<Item>(i, live); });
  EXPECT_EQ(s.acquire(0).index, 0);
  s.release(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // items 1 and 2 loaded ahead
  EXPECT_EQ(s.acquire(3).index, 3);
  s.release(3);
  EXPECT_EQ(s.acquire(4).index, 4);
  s.release(4);
}

// Random orders of use (mostly cyclic, with jumps and repeats) with loads of random length:
// never a wrong item, never a hang (a hang here is the failure: ctest's timeout ends it).
TEST(PrefetchStream, RandomOrdersOfUse) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 2 + static_cast<int>(rng() % 7);
    const int pinned = static_cast<int>(rng() % static_cast<unsigned>(n));
    const int window = 1 + static_cast<int>(rng() % 3);
    std::atomic<int> live{0};
    std::atomic<uint32_t> seed{static_cast<uint32_t>(trial)};
    PrefetchStream<Item> s(n, pinned, window, [&](int i) {
      std::this_thread::sleep_for(std::chrono::microseconds((seed.fetch_add(7) * 37) % 300));
      return std::make_unique<Item>(i, live);
    });
    int i = 0;
    for (int step = 0; step < 60; ++step) {
      const unsigned r = rng() % 10;
      i = r < 7 ? (i + 1) % n : static_cast<int>(rng() % static_cast<unsigned>(n));
      ASSERT_EQ(s.acquire(i).index, i) << "trial " << trial << " step " << step;
      s.release(i);
    }
  }
}

TEST(PrefetchStream, AFailedLoadIsRethrownAndTheStreamRecovers) {
  std::atomic<int> live{0};
  std::atomic<bool> fail{true};
  PrefetchStream<Item> s(4, 0, 2, [&](int i) {
    if (i == 2 && fail.load()) throw std::runtime_error("cannot read block 2");
    return std::make_unique<Item>(i, live);
  });
  EXPECT_EQ(s.acquire(0).index, 0);
  s.release(0);
  EXPECT_EQ(s.acquire(1).index, 1);
  s.release(1);
  EXPECT_THROW(s.acquire(2), std::runtime_error);
  fail = false;
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(s.acquire(i).index, i);
    s.release(i);
  }
}

}  // namespace
}  // namespace vidax
