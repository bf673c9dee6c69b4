// Helpers shared by the tests: fixture paths, tolerance comparisons, random inputs.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace vidax::testing {

// Path of a file in ../shared/fixtures/wan; empty string when the fixtures folder is absent.
std::string wan_fixture(const std::string& name);

// Skips the current test with a clear message when the fixture file is missing.
#define VIDAX_REQUIRE_FIXTURE(path_var, name)                       \
  const std::string path_var = ::vidax::testing::wan_fixture(name); \
  if (path_var.empty())                                             \
    GTEST_SKIP() << "fixture " << (name) << " not found under " << VIDAX_FIXTURES_DIR;

// |a - b| <= atol + rtol * |b| elementwise, b the reference. Shapes must match. On failure the
// message names `what`, the worst element (flat index), and the max abs error.
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& reference, double atol,
                                     double rtol, const std::string& what = "");

// max |actual - reference| / max |reference| (the mesh tests' measure: a tolerance relative to
// the output's scale). An element-count mismatch fails the calling test.
double max_rel_diff(const Tensor& actual, const Tensor& reference);

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);
Tensor random_tensor(const Shape& shape, uint32_t seed, float scale = 1.0f);

// Runs `body` once per Highway SIMD target that was compiled and that this CPU supports
// (hwy::SetSupportedTargetsForTest), then restores normal dispatch.
void for_each_target(const std::function<void()>& body);

// Running commands (CLI tests drive the real binary, VIDAX_BINARY).
struct CommandResult {
  int code;         // exit status, or 128 + signal
  std::string out;  // stdout and stderr together
};
CommandResult run_shell(const std::string& command);  // through /bin/sh
CommandResult run_vidax(const std::string& args);     // VIDAX_BINARY + " " + args
int count_lines(const std::string& text);
// An input error: exit code 1, exactly one line, mentioning `needle`.
void expect_one_line_error(const std::string& args, const std::string& needle);

// Temporary directory removed at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace vidax::testing
