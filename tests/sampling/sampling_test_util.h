// Helpers for the sampling tests: fixture loading, error statistics, bitwise comparison.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace vidax::testing {

// The fixture configurations of README 5.8: steps and shift per tag.
struct SchedConfig {
  const char* tag;
  int steps;
  double shift;
};
inline constexpr SchedConfig kSchedConfigs[] = {
    {"s10_sh5", 10, 5.0}, {"s10_sh3", 10, 3.0}, {"s50_sh5", 50, 5.0}, {"s50_sh3", 50, 3.0}};

// Suggested scheduler tolerance of the fixture README: |diff| <= 1e-5 + 1e-5 * |ref|.
inline constexpr double kSchedAtol = 1e-5;
inline constexpr double kSchedRtol = 1e-5;

// Running max of |a - b| and of |a - b| / max(|b|, tiny), plus a count of bit differences.
struct ErrorStats {
  double max_abs = 0;
  double max_rel = 0;
  int64_t differing = 0;  // elements whose float bits differ
  int64_t total = 0;

  void add(const Tensor& actual, const Tensor& reference) {
    const std::vector<float> a = actual.to_float_vector();
    const std::vector<float> r = reference.to_float_vector();
    for (size_t i = 0; i < a.size() && i < r.size(); ++i) {
      const double d = std::fabs(static_cast<double>(a[i]) - r[i]);
      max_abs = std::max(max_abs, d);
      max_rel = std::max(max_rel, d / std::max(std::fabs(static_cast<double>(r[i])), 1e-30));
      if (std::memcmp(&a[i], &r[i], sizeof(float)) != 0) ++differing;
      ++total;
    }
  }
  std::string str() const {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "max abs %.3g, max rel %.3g, %lld/%lld elements not bit-equal",
                  max_abs, max_rel, static_cast<long long>(differing),
                  static_cast<long long>(total));
    return buf;
  }
};

// Number of elements whose float bits differ (0 = bit-identical). Shapes must have equal numel.
inline int64_t count_bit_differences(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_float_vector();
  const std::vector<float> y = b.to_float_vector();
  if (x.size() != y.size()) return -1;
  int64_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::memcmp(&x[i], &y[i], sizeof(float)) != 0) ++bad;
  }
  return bad;
}

}  // namespace vidax::testing
