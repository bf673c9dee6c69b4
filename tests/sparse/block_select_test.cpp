// select_top_k / select_top_p against the plain rule (stable descending sort, take the first k,
// or the prefix until the running sum reaches p * total) on random rows of ragged lengths, with
// many ties (values drawn from a few levels), negative scores, NaN and the edge cases of k and p.
#include "sparse/block_select.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace vidax::sparse {
namespace {

std::vector<uint8_t> bits_to_flags(const std::vector<uint64_t>& bits, int64_t n) {
  std::vector<uint8_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    out[static_cast<size_t>(i)] = (bits[static_cast<size_t>(i / 64)] >> (i % 64)) & 1;
  return out;
}

// Descending order, ties by index; NaN (scores) last.
std::vector<int64_t> stable_descending(const std::vector<double>& v) {
  std::vector<int64_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const double x = v[static_cast<size_t>(a)], y = v[static_cast<size_t>(b)];
    if (std::isnan(y)) return !std::isnan(x);
    return !std::isnan(x) && x > y;
  });
  return order;
}

std::vector<uint8_t> reference_top_k(const std::vector<float>& s, int64_t k) {
  const std::vector<double> v(s.begin(), s.end());
  const auto order = stable_descending(v);
  std::vector<uint8_t> keep(s.size(), 0);
  for (int64_t r = 0; r < std::min<int64_t>(k, static_cast<int64_t>(s.size())); ++r)
    keep[static_cast<size_t>(order[static_cast<size_t>(r)])] = 1;
  return keep;
}

std::vector<uint8_t> reference_top_p(const std::vector<double>& w, double p) {
  const auto order = stable_descending(w);
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  std::vector<uint8_t> keep(w.size(), 0);
  double kept = 0;
  for (size_t r = 0; r < w.size() && p > 0 && kept < p * total; ++r) {
    keep[static_cast<size_t>(order[r])] = 1;
    kept += w[static_cast<size_t>(order[r])];
  }
  return keep;
}

std::vector<uint8_t> run_top_k(const std::vector<float>& s, int64_t k) {
  const auto n = static_cast<int64_t>(s.size());
  const auto words = static_cast<size_t>((n + 63) / 64);
  std::vector<uint64_t> bits(words + 1, 0);  // one word more: nothing may be written there
  select_top_k(s.data(), n, k, bits.data());
  EXPECT_EQ(bits[words], 0u) << "bits past n set";
  if (n % 64) {
    EXPECT_EQ(bits[words - 1] >> (n % 64), 0u) << "bits past n set";
  }
  return bits_to_flags(bits, n);
}

std::vector<uint8_t> run_top_p(const std::vector<double>& w, double p) {
  const auto n = static_cast<int64_t>(w.size());
  std::vector<uint64_t> bits(static_cast<size_t>((n + 63) / 64), 0);
  select_top_p(w.data(), n, p, bits.data());
  return bits_to_flags(bits, n);
}

// Runs fn with the AVX-512 loops (where the machine has them) and with the portable ones.
template <class Fn>
void both_paths(Fn&& fn) {
  for (const bool portable : {false, true}) {
    SCOPED_TRACE(portable ? "portable loops" : "default loops");
    block_select_force_portable(portable);
    fn();
  }
  block_select_force_portable(false);
}

TEST(BlockSelect, TopKMatchesStableSortOnRandomRows) {
  both_paths([] {
    std::mt19937 rng(5);
    for (const int64_t n : {1, 2, 7, 63, 64, 65, 129, 700, 1013}) {
      for (int trial = 0; trial < 6; ++trial) {
        std::vector<float> s(static_cast<size_t>(n));
        std::normal_distribution<float> nd(0.0f, trial % 2 ? 40.0f : 1.0f);
        std::uniform_int_distribution<int> level(-3, 3);
        for (auto& x : s)
          x = trial >= 4 ? static_cast<float>(level(rng)) * 0.5f : nd(rng);  // 4, 5: ties
        if (trial == 3 && n > 3) s[2] = std::nanf("");
        for (const int64_t k : {int64_t{1}, int64_t{3}, n / 10 + 1, n - 1, n, n + 5}) {
          if (k >= 1) {
            EXPECT_EQ(run_top_k(s, k), reference_top_k(s, k))
                << "n " << n << " trial " << trial << " k " << k;
          }
        }
      }
    }
  });
}

TEST(BlockSelect, TopKOnEqualAndSignedValues) {
  both_paths([] {
    const std::vector<float> equal(100, 2.5f);
    EXPECT_EQ(run_top_k(equal, 10), reference_top_k(equal, 10));  // the first 10
    const std::vector<float> mixed = {-0.0f,     0.0f,     -1e-30f, 1e-30f,
                                      -INFINITY, INFINITY, -3.0f,   3.0f};
    for (int64_t k = 1; k <= 8; ++k) EXPECT_EQ(run_top_k(mixed, k), reference_top_k(mixed, k)) << k;
  });
}

TEST(BlockSelect, TopPMatchesTheRunningSumRule) {
  std::mt19937 rng(9);
  for (const int64_t n : {1, 3, 64, 65, 300, 777}) {
    for (int trial = 0; trial < 5; ++trial) {
      std::vector<double> w(static_cast<size_t>(n));
      std::exponential_distribution<double> ed(1.0);
      std::uniform_int_distribution<int> level(0, 4);
      for (auto& x : w)
        x = trial >= 3 ? 64.0 * level(rng) : 64.0 * std::exp(-8.0 * ed(rng));  // 3, 4: ties, 0s
      for (const double p : {0.0, 0.1, 0.5, 0.9, 0.97, 1.0}) {
        const auto got = run_top_p(w, p);
        if (p == 1.0) {  // the whole row (the running sum's rounding does not decide)
          EXPECT_EQ(got, std::vector<uint8_t>(w.size(), 1));
          continue;
        }
        EXPECT_EQ(got, reference_top_p(w, p)) << "n " << n << " trial " << trial << " p " << p;
      }
    }
  }
}

TEST(BlockSelect, TopPEdgeCases) {
  const std::vector<double> w = {1, 4, 2, 4, 0, 1};  // total 12
  EXPECT_EQ(run_top_p(w, 0.0), std::vector<uint8_t>(6, 0));
  EXPECT_EQ(run_top_p(w, 1.0 / 3), (std::vector<uint8_t>{0, 1, 0, 0, 0, 0}));  // 4 reaches 4
  EXPECT_EQ(run_top_p(w, 0.34), (std::vector<uint8_t>{0, 1, 0, 1, 0, 0}));     // tie by index
  EXPECT_EQ(run_top_p(w, 0.75), (std::vector<uint8_t>{0, 1, 1, 1, 0, 0}));     // 10 >= 9
  EXPECT_EQ(run_top_p(w, 0.85), (std::vector<uint8_t>{1, 1, 1, 1, 0, 0}));     // 11 >= 10.2
  EXPECT_EQ(run_top_p(w, 1.5), std::vector<uint8_t>(6, 1));  // p >= 1: everything, the 0 too
}

}  // namespace
}  // namespace vidax::sparse
