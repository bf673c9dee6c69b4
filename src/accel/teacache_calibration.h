// Fitting TeaCache's polynomial for a model without published coefficients, as the TeaCache
// authors describe it (ali-vilab/TeaCache issue #2): over dense runs of calibration prompts,
// record for every pair of consecutive calls of a CFG branch x = the relative L1 change of the
// modulated input (the time embedding e, or e0 in use_ret_steps mode) and y = the relative L1
// change of the model's output, then fit y = c0 x^4 + c1 x^3 + c2 x^2 + c3 x + c4 by least
// squares (numpy.polyfit(x, y, 4)). `vidax calibrate --method teacache` writes the fit,
// `--accel teacache:table=FILE` uses it. Not thread-safe.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "accel/step_method.h"

namespace vidax::accel {

struct TeaCachePairs {
  std::vector<double> x, y;
};

// Least-squares polynomial of degree 4, highest power first (numpy.polyfit order). InputError
// with fewer than 5 distinct x.
std::array<double, 5> polyfit4(const std::vector<double>& x, const std::vector<double>& y);

// A dense run that records the pairs (e0 = use_ret_steps mode).
std::unique_ptr<StepMethod> make_teacache_calibration(const RunInfo& run, bool e0,
                                                      std::shared_ptr<TeaCachePairs> pairs);

// {"method": "teacache", "mode": "e"|"e0", "coefficients": [5], "points": N, "provenance": ..}
void write_teacache_table(const std::string& path, const std::array<double, 5>& coefficients,
                          bool e0, size_t points, const std::string& provenance_json);
// The coefficients and whether they are for e0; InputError naming the file otherwise.
std::pair<std::array<double, 5>, bool> read_teacache_table(const std::string& path);

}  // namespace vidax::accel
