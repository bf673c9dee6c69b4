#include "support/test_support.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "hwy/targets.h"

namespace vidax::testing {

std::string wan_fixture(const std::string& name) {
  const std::string path = std::string(VIDAX_FIXTURES_DIR) + "/wan/" + name;
  return std::filesystem::exists(path) ? path : std::string();
}

double max_rel_diff(const Tensor& actual, const Tensor& reference) {
  const auto x = actual.to_float_vector(), y = reference.to_float_vector();
  EXPECT_EQ(x.size(), y.size());
  double d = 0, m = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    d = std::max(d, static_cast<double>(std::fabs(x[i] - y[i])));
    m = std::max(m, static_cast<double>(std::fabs(y[i])));
  }
  return d / std::max(m, 1e-30);
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& reference, double atol,
                                     double rtol, const std::string& what) {
  if (actual.numel() != reference.numel()) {
    return ::testing::AssertionFailure() << what << ": element count " << actual.shape().str()
                                         << " vs reference " << reference.shape().str();
  }
  const std::vector<float> a = actual.to_float_vector();
  const std::vector<float> r = reference.to_float_vector();
  double worst_excess = 0, max_abs = 0;
  size_t worst = 0, bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - r[i]);
    const double allowed = atol + rtol * std::fabs(static_cast<double>(r[i]));
    if (!(d <= allowed)) {  // also catches NaN
      ++bad;
      if (!(d - allowed <= worst_excess)) {
        worst_excess = d - allowed;
        worst = i;
      }
    }
    if (d > max_abs || std::isnan(d)) max_abs = d;
  }
  if (bad == 0) return ::testing::AssertionSuccess() << what << ": max abs " << max_abs;
  return ::testing::AssertionFailure()
         << what << ": " << bad << " of " << a.size() << " elements outside " << atol << " + "
         << rtol << "*|ref|; worst at flat index " << worst << ": got " << a[worst]
         << ", reference " << r[worst] << "; max abs error " << max_abs;
}

std::vector<float> random_floats(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

Tensor random_tensor(const Shape& shape, uint32_t seed, float scale) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  Tensor t = Tensor::zeros(shape, DType::kF32);
  float* p = t.mutable_data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(gen);
  return t;
}

void for_each_target(const std::function<void()>& body) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    hwy::SetSupportedTargetsForTest(target);
    body();
  }
  hwy::SetSupportedTargetsForTest(0);
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "vidax_test_XXXXXX").string();
  char* p = mkdtemp(tmpl.data());
  if (p == nullptr) std::abort();
  path_ = p;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

CommandResult run_shell(const std::string& command) {
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return {127, "popen failed: " + command};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

CommandResult run_vidax(const std::string& args) {
  return run_shell(std::string(VIDAX_BINARY) + " " + args);
}

int count_lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

void expect_one_line_error(const std::string& args, const std::string& needle) {
  const CommandResult r = run_vidax(args);
  EXPECT_EQ(r.code, 1) << args << "\n" << r.out;
  EXPECT_EQ(count_lines(r.out), 1) << args << "\n" << r.out;
  EXPECT_NE(r.out.find(needle), std::string::npos)
      << args << "\nexpected '" << needle << "' in: " << r.out;
}

}  // namespace vidax::testing
