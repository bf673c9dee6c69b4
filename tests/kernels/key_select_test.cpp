// The key-selection kernels (AVX-512 where present) against their plain-loop references on
// ragged random sizes: the results must be identical (integer compares; sums in index order).
#include "kernels/cpu/key_select.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace vidax {
namespace {

// Sizes around the 16-lane steps and 64-key words, and a few larger rows.
const std::vector<int64_t> kSizes = {1, 2, 15, 16, 17, 31, 63, 64, 65, 100, 129, 700, 1031};

// Scores with ties (a few levels), negatives, signed zeros and NaN.
std::vector<float> scores(int64_t n, std::mt19937& gen) {
  std::uniform_int_distribution<int> pick(0, 9);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) {
    const int c = pick(gen);
    x = c == 0 ? std::nanf("") : c == 1 ? -0.0f : c == 2 ? 0.0f : c < 5 ? 1.5f : normal(gen);
  }
  return v;
}

TEST(KeySelect, FloatOrderKeysMatchReference) {
  std::mt19937 gen(7);
  for (int64_t n : kSizes) {
    const auto x = scores(n, gen);
    std::vector<uint32_t> k(x.size()), kr(x.size());
    uint32_t lo = 1, hi = 1, lor = 2, hir = 2;
    float_order_keys(x.data(), n, k.data(), &lo, &hi);
    float_order_keys_reference(x.data(), n, kr.data(), &lor, &hir);
    EXPECT_EQ(k, kr) << "n " << n;
    EXPECT_EQ(lo, lor) << "n " << n;
    EXPECT_EQ(hi, hir) << "n " << n;
  }
}

TEST(KeySelect, CountsMarksAndBucketsMatchReference) {
  std::mt19937 gen(11);
  for (int64_t n : kSizes) {
    const auto x = scores(n, gen);
    std::vector<uint32_t> key(x.size());
    uint32_t lo = 0, hi = 0;
    float_order_keys_reference(x.data(), n, key.data(), &lo, &hi);
    // Cuts at every key value present and just beside the range.
    std::vector<uint32_t> cuts(key.begin(), key.end());
    cuts.push_back(0);
    cuts.push_back(hi + 1);
    for (uint32_t t : cuts) {
      EXPECT_EQ(count_keys_at_least(key.data(), n, t),
                count_keys_at_least_reference(key.data(), n, t))
          << "n " << n << " t " << t;
      const size_t words = static_cast<size_t>((n + 63) / 64) + 1;     // one guard word
      std::vector<uint64_t> bits(words, 0x5u), bits_ref(words, 0x5u);  // not cleared: OR-ed
      EXPECT_EQ(mark_keys_above(key.data(), n, t, bits.data()),
                mark_keys_above_reference(key.data(), n, t, bits_ref.data()));
      EXPECT_EQ(bits, bits_ref) << "n " << n << " t " << t;
      for (int shift : {0, 3, 20}) {
        std::vector<uint32_t> out(x.size() + 16), out_ref(x.size() + 16);
        int64_t above = -1, above_ref = -2;
        const int64_t m = keys_in_bucket(key.data(), n, t, shift, out.data(), &above);
        const int64_t mr =
            keys_in_bucket_reference(key.data(), n, t, shift, out_ref.data(), &above_ref);
        ASSERT_EQ(m, mr) << "n " << n << " t " << t << " shift " << shift;
        EXPECT_EQ(above, above_ref);
        out.resize(static_cast<size_t>(m));
        out_ref.resize(static_cast<size_t>(mr));
        EXPECT_EQ(out, out_ref);
      }
    }
  }
}

TEST(KeySelect, SumAtLeastMatchesReference) {
  std::mt19937 gen(13);
  std::uniform_real_distribution<double> u(0.0, 2.0);
  std::uniform_int_distribution<uint64_t> level(0, 40);
  for (int64_t n : kSizes) {
    std::vector<uint64_t> key(static_cast<size_t>(n));
    std::vector<double> w(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      key[static_cast<size_t>(i)] = level(gen) << 40;
      w[static_cast<size_t>(i)] = u(gen);
    }
    for (uint64_t t : {uint64_t{0}, uint64_t{7} << 40, uint64_t{20} << 40, uint64_t{41} << 40})
      EXPECT_EQ(sum_at_least(key.data(), w.data(), n, t),
                sum_at_least_reference(key.data(), w.data(), n, t))
          << "n " << n << " t " << t;
  }
}

}  // namespace
}  // namespace vidax
