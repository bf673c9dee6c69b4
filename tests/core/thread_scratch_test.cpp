// ThreadScratch: buffers kept per thread between kernel calls are all freed by
// release_thread_scratch(), whichever thread made them; the environment's kernel choices.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdlib>
#include <vector>

#include "core/exec_context.h"
#include "core/thread_scratch.h"

namespace vidax {
namespace {

std::vector<float>& scratch() {
  thread_local ThreadScratch<std::vector<float>> s;
  return s.value;
}

TEST(ThreadScratch, ReleaseFreesEveryThreadsBuffer) {
  std::vector<size_t> capacity(4, 0);
#pragma omp parallel num_threads(4)
  {
    scratch().resize(100000);
    capacity[static_cast<size_t>(omp_get_thread_num())] = scratch().capacity();
  }
  for (size_t c : capacity) EXPECT_GE(c, 100000u);
  EXPECT_GE(release_thread_scratch(), 1u);
  std::vector<size_t> after(4, 1);
#pragma omp parallel num_threads(4)
  after[static_cast<size_t>(omp_get_thread_num())] = scratch().capacity();
  for (size_t c : after) EXPECT_EQ(c, 0u);
}

TEST(ExecContext, KernelChoicesComeFromTheEnvironment) {
  setenv("VIDAX_GEMM", "onednn", 1);
  setenv("VIDAX_BF16_DOT", "0", 1);
  setenv("VIDAX_CONV", "widened", 1);
  const ExecContext c = ExecContext::from_environment();
  EXPECT_EQ(c.kernels.gemm, "onednn");
  EXPECT_EQ(c.kernels.bf16_dot, 0);
  EXPECT_TRUE(c.kernels.conv_widened);
  EXPECT_EQ(c.mesh, nullptr);
  unsetenv("VIDAX_GEMM");
  unsetenv("VIDAX_BF16_DOT");
  unsetenv("VIDAX_CONV");
  const KernelChoices none = KernelChoices::from_environment();
  EXPECT_TRUE(none.gemm.empty());
  EXPECT_EQ(none.bf16_dot, -1);
  EXPECT_FALSE(none.conv_widened);
}

}  // namespace
}  // namespace vidax
