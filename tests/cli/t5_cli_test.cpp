// `vidax run t5` and `vidax bench t5` through the real binary: fixture parity from a file of
// ids/mask, the prompt path, and one-line errors.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>

#include "io/safetensors.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using vidax::testing::all_close;
using vidax::testing::TempDir;
using Result = vidax::testing::CommandResult;
using vidax::testing::expect_one_line_error;
using vidax::testing::run_vidax;

const std::string kTokenizer = std::string(VIDAX_SOURCE_DIR) + "/tests/data/tokenizer";

TEST(CliT5, RunMatchesFixture) {
  VIDAX_REQUIRE_FIXTURE(weights, "t5_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(io_path, "t5_tiny.io.safetensors");
  TempDir dir;
  const Result r = run_vidax("run t5 --weights " + weights + " --in " + io_path + " --out " +
                             dir.file("out.safetensors"));
  ASSERT_EQ(r.code, 0) << r.out;
  auto out = SafetensorsFile::open(dir.file("out.safetensors"));
  auto io = SafetensorsFile::open(io_path);
  for (const char* name : {"out", "context", "embed", "block1.pos_bias", "block1.out"})
    EXPECT_TRUE(all_close(out.tensor(name), io.tensor(name), 1e-5, 1e-5, name));
  EXPECT_TRUE(out.contains("rel_buckets"));
}

TEST(CliT5, PromptPathWritesIdsMaskAndContext) {
  VIDAX_REQUIRE_FIXTURE(weights, "t5_tiny.weights.safetensors");
  TempDir dir;
  // The tiny model's vocabulary (256) is smaller than the test tokenizer's (300); these words'
  // ids all fit (an id beyond it would be an "outside the vocabulary" error).
  const Result r = run_vidax("run t5 --weights " + weights + " --tokenizer " + kTokenizer +
                             " --prompt 'A  cat walks' --max-len 16 --no-intermediates --out " +
                             dir.file("p.safetensors"));
  ASSERT_EQ(r.code, 0) << r.out;
  auto out = SafetensorsFile::open(dir.file("p.safetensors"));
  EXPECT_EQ(out.entries().size(), 3u);
  EXPECT_EQ(out.tensor("ids").shape(), (Shape{1, 16}));
  int64_t count = 0;
  for (int64_t i = 0; i < 16; ++i) count += out.tensor("mask").data<int64_t>()[i];
  EXPECT_EQ(out.tensor("context").shape(), (Shape{count, 32}));
  EXPECT_EQ(out.tensor("ids").data<int64_t>()[count - 1], 1);  // </s>
}

TEST(CliT5, BatchFromFileMatchesOfficialBatch) {
  VIDAX_REQUIRE_FIXTURE(weights, "t5_tiny.weights.safetensors");
  const std::string io_path =
      std::string(VIDAX_SOURCE_DIR) + "/tests/data/t5_batch/t5_batch.io.safetensors";
  TempDir dir;
  const Result r = run_vidax("run t5 --weights " + weights + " --in " + io_path + " --out " +
                             dir.file("out.safetensors"));
  ASSERT_EQ(r.code, 0) << r.out;
  auto out = SafetensorsFile::open(dir.file("out.safetensors"));
  auto io = SafetensorsFile::open(io_path);
  for (const char* name : {"out", "context.0", "context.1", "context.2"})
    EXPECT_TRUE(all_close(out.tensor(name), io.tensor(name), 1e-5, 1e-5, name));
  EXPECT_FALSE(out.contains("context"));
  EXPECT_EQ(out.tensor("block0.out").shape(), (Shape{3, 12, 32}));
}

TEST(CliT5, PromptBatchEqualsEachPromptAlone) {
  VIDAX_REQUIRE_FIXTURE(weights, "t5_tiny.weights.safetensors");
  TempDir dir;
  const std::string base = "run t5 --weights " + weights + " --tokenizer " + kTokenizer +
                           " --max-len 16 --no-intermediates";
  // Two --prompt flags, and the same two lines from a file (with a blank line and CRLF).
  ASSERT_EQ(
      run_vidax(base + " --prompt 'A cat walks' --prompt 'a' --out " + dir.file("b.safetensors"))
          .code,
      0);
  {
    FILE* f = std::fopen(dir.file("prompts.txt").c_str(), "wb");
    std::fputs("A cat walks\r\n\n  a  \n", f);
    std::fclose(f);
  }
  const Result rf = run_vidax(base + " --prompts " + dir.file("prompts.txt") + " --out " +
                              dir.file("f.safetensors"));
  ASSERT_EQ(rf.code, 0) << rf.out;
  auto batch = SafetensorsFile::open(dir.file("b.safetensors"));
  auto file = SafetensorsFile::open(dir.file("f.safetensors"));
  EXPECT_EQ(batch.tensor("ids").shape(), (Shape{2, 16}));
  const char* prompts[] = {"'A cat walks'", "'a'"};
  for (int b = 0; b < 2; ++b) {
    const std::string one = dir.file("one" + std::to_string(b) + ".safetensors");
    ASSERT_EQ(run_vidax(base + " --prompt " + prompts[b] + " --out " + one).code, 0);
    const Tensor alone = SafetensorsFile::open(one).tensor("context");
    const std::string name = "context." + std::to_string(b);
    EXPECT_TRUE(all_close(batch.tensor(name), alone, 1e-6, 1e-6, name));
    EXPECT_TRUE(all_close(file.tensor(name), alone, 1e-6, 1e-6, name + " (file)"));
  }
  EXPECT_NE(batch.tensor("context.0").dim(0), batch.tensor("context.1").dim(0));
}

TEST(CliT5, BadInputIsOneLine) {
  VIDAX_REQUIRE_FIXTURE(weights, "t5_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(io_path, "t5_tiny.io.safetensors");
  TempDir dir;
  const std::string out = " --out " + dir.file("o.safetensors");
  expect_one_line_error("run t5 --weights " + weights + out, "either --in");
  expect_one_line_error("run t5 --weights " + weights + " --prompt hi" + out, "--tokenizer");
  expect_one_line_error(
      "run t5 --weights " + weights + " --in " + io_path + " --precision fp64" + out,
      "--precision");
  expect_one_line_error("run t5 --weights " + io_path + " --in " + io_path + out, "not a umT5");
  write_safetensors(dir.file("in.safetensors"), {{"ids", Tensor::zeros(Shape{1, 4}, DType::kI64)}});
  expect_one_line_error("run t5 --weights " + weights + " --in " + dir.file("in.safetensors") + out,
                        "'mask'");
  Tensor ids = Tensor::zeros(Shape{1, 3}, DType::kI64),
         mask = Tensor::zeros(Shape{1, 3}, DType::kI64);
  ids.mutable_data<int64_t>()[1] = 999;
  for (int i = 0; i < 3; ++i) mask.mutable_data<int64_t>()[i] = 1;
  write_safetensors(dir.file("oov.safetensors"), {{"ids", ids}, {"mask", mask}});
  expect_one_line_error(
      "run t5 --weights " + weights + " --in " + dir.file("oov.safetensors") + out,
      "outside the vocabulary");
  expect_one_line_error(
      "run t5 --weights " + weights + " --tokenizer " + dir.path() + " --prompt hi" + out,
      "spiece.model");
  expect_one_line_error("bench t5 --tokens 0", "--tokens");
  expect_one_line_error("run t5 --weights " + weights + " --tokenizer " + kTokenizer +
                            " --prompts " + dir.file("missing.txt") + out,
                        "missing.txt");
  {
    FILE* f = std::fopen(dir.file("blank.txt").c_str(), "wb");
    std::fputs("  \n\n", f);
    std::fclose(f);
  }
  expect_one_line_error("run t5 --weights " + weights + " --tokenizer " + kTokenizer +
                            " --prompts " + dir.file("blank.txt") + out,
                        "no prompt");
  write_safetensors(dir.file("mismatch.safetensors"),
                    {{"ids", Tensor::zeros(Shape{2, 4}, DType::kI64)},
                     {"mask", Tensor::zeros(Shape{2, 3}, DType::kI64)}});
  expect_one_line_error(
      "run t5 --weights " + weights + " --in " + dir.file("mismatch.safetensors") + out, "mask");
}

TEST(CliT5, BenchRunsOnACheckpoint) {
  VIDAX_REQUIRE_FIXTURE(weights, "t5_tiny.weights.safetensors");
  const Result r = run_vidax("bench t5 --weights " + weights + " --tokens 8 --iters 1 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("\"seconds_per_encode\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"tokens\":8"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace vidax
