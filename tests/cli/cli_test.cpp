// Drives the real `vidax` binary: outputs on the fixtures, and one-line errors with a non-zero
// exit for bad input.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using vidax::testing::all_close;
using vidax::testing::TempDir;
using Result = vidax::testing::CommandResult;
using vidax::testing::count_lines;
using vidax::testing::expect_one_line_error;
inline Result run(const std::string& args) { return vidax::testing::run_vidax(args); }

// The fixture's first DiT call as `run dit` inputs.
void write_call0_inputs(const SafetensorsFile& io, const std::string& path) {
  write_safetensors(path, {{"x", io.tensor("x")},
                           {"t", io.tensor("call0.t")},
                           {"context", io.tensor("context")},
                           {"seq_len", io.tensor("seq_len")}});
}

TEST(Cli, RunDitMatchesFixtureOutput) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(io_path, "dit_t2v_tiny.io.safetensors");
  TempDir dir;
  auto io = SafetensorsFile::open(io_path);
  write_call0_inputs(io, dir.file("in.safetensors"));
  const Result r = run("run dit --weights " + weights + " --in " + dir.file("in.safetensors") +
                       " --out " + dir.file("out.safetensors"));
  ASSERT_EQ(r.code, 0) << r.out;
  auto out = SafetensorsFile::open(dir.file("out.safetensors"));
  EXPECT_TRUE(all_close(out.tensor("out"), io.tensor("call0.out"), 1e-4, 1e-4, "run dit"));
}

// --weights-budget: the tiny fixture's embeddings and head take ~2.4 MiB and each block ~3 MiB in
// f32, so 7 MiB keeps no block and streams both through a window of one; the prediction is bit
// for bit the resident one. Budgets below one block and sizes that are not sizes are refused.
TEST(Cli, RunDitWithAWeightsBudgetIsBitwiseTheResidentRun) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(io_path, "dit_t2v_tiny.io.safetensors");
  TempDir dir;
  auto io = SafetensorsFile::open(io_path);
  write_call0_inputs(io, dir.file("in.safetensors"));
  const std::string common =
      "run dit --weights " + weights + " --in " + dir.file("in.safetensors") + " --out ";
  ASSERT_EQ(run(common + dir.file("resident.safetensors")).code, 0);
  const Result r = run(common + dir.file("streamed.safetensors") + " --weights-budget 7MiB");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(
      SafetensorsFile::open(dir.file("streamed.safetensors")).tensor("out").to_float_vector(),
      SafetensorsFile::open(dir.file("resident.safetensors")).tensor("out").to_float_vector());
  expect_one_line_error(common + dir.file("x.safetensors") + " --weights-budget 1MiB",
                        "weights budget 1.0 MiB is smaller than the embeddings and head");
  expect_one_line_error(common + dir.file("x.safetensors") + " --weights-budget lots",
                        "--weights-budget: expected a byte count");
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.safetensors")));
  // bench dit reports what the stream did: both blocks loaded at every forward.
  const Result b = run("bench dit --weights " + weights +
                       " --precision fp32 --frames 5 --size 64x32 --iters 2 --warmup 1 --json "
                       "--no-peak --weights-budget 7MiB");
  ASSERT_EQ(b.code, 0) << b.out;
  const auto j = nlohmann::json::parse(b.out.substr(b.out.find('{')));
  EXPECT_EQ(j["weight_stream"]["streamed_blocks"], 2) << b.out;
  // 2 per forward; the loader may be one block ahead at either end of the timed forwards.
  EXPECT_NEAR(j["weight_stream"]["loads_per_unit"].get<double>(), 2.0, 0.5) << b.out;
  EXPECT_EQ(j["weight_stream"]["uses_per_unit"].get<double>(), 2.0) << b.out;
  EXPECT_LE(j["weight_bytes"].get<double>(), 7.0 * (1 << 20)) << b.out;
}

// --keep-fp16: the fixture's DiT stored as fp16 and run in fp32 keeps its block weights fp16
// (half of converting them to f32) and gives the converted run's prediction to summation order;
// with bf16 it is refused in one line (bf16 holds fp16 weights at the same size).
TEST(Cli, RunDitKeepsFp16WeightsForFp32) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(io_path, "dit_t2v_tiny.io.safetensors");
  TempDir dir;
  auto io = SafetensorsFile::open(io_path);
  write_call0_inputs(io, dir.file("in.safetensors"));
  const SafetensorsFile f32 = SafetensorsFile::open(weights);
  std::vector<std::pair<std::string, Tensor>> halves;
  for (const TensorEntry& e : f32.entries())
    halves.emplace_back(e.name, f32.tensor(e.name).to(DType::kF16));
  write_safetensors(dir.file("f16.safetensors"), halves);
  const std::string common = "run dit --weights " + dir.file("f16.safetensors") + " --in " +
                             dir.file("in.safetensors") + " --out ";
  ASSERT_EQ(run(common + dir.file("converted.safetensors")).code, 0);
  const Result r = run(common + dir.file("kept.safetensors") + " --keep-fp16");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(all_close(SafetensorsFile::open(dir.file("kept.safetensors")).tensor("out"),
                        SafetensorsFile::open(dir.file("converted.safetensors")).tensor("out"),
                        1e-5, 1e-5, "kept fp16"));
  expect_one_line_error(common + dir.file("x.safetensors") + " --keep-fp16 --precision bf16",
                        "--keep-fp16 keeps fp16 weights for --precision fp32");
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.safetensors")));
  // bench dit: the weights held fall by about the blocks' half.
  auto held = [&](const std::string& extra) {
    const Result b = run("bench dit --weights " + dir.file("f16.safetensors") +
                         " --precision fp32 --frames 5 --size 64x32 --iters 1 --warmup 0 --json "
                         "--no-peak" +
                         extra);
    EXPECT_EQ(b.code, 0) << b.out;
    return nlohmann::json::parse(b.out.substr(b.out.find('{')))["weight_bytes"].get<double>();
  };
  const double converted = held(""), kept = held(" --keep-fp16");
  EXPECT_LT(kept, 0.7 * converted) << kept << " of " << converted;
}

TEST(Cli, RunDitBatchedSamplesWithOwnTimesteps) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(io_path, "dit_t2v_tiny.io.safetensors");
  TempDir dir;
  auto io = SafetensorsFile::open(io_path);
  Tensor t = Tensor::from_floats(std::vector<float>{731.0f, 12.5f}, Shape{2});
  write_safetensors(dir.file("in.safetensors"), {{"x.0", io.tensor("x")},
                                                 {"x.1", io.tensor("x")},
                                                 {"t", t},
                                                 {"context.0", io.tensor("context")},
                                                 {"context.1", io.tensor("context")},
                                                 {"seq_len", io.tensor("seq_len")}});
  const Result r = run("run dit --weights " + weights + " --in " + dir.file("in.safetensors") +
                       " --out " + dir.file("out.safetensors"));
  ASSERT_EQ(r.code, 0) << r.out;
  auto out = SafetensorsFile::open(dir.file("out.safetensors"));
  EXPECT_TRUE(all_close(out.tensor("out.0"), io.tensor("call0.out"), 1e-4, 1e-4, "sample 0"));
  EXPECT_TRUE(all_close(out.tensor("out.1"), io.tensor("call1.out"), 1e-4, 1e-4, "sample 1"));
}

TEST(Cli, RunNoiseReproducesTorchRandn) {
  VIDAX_REQUIRE_FIXTURE(randn, "randn_cpu.safetensors");
  TempDir dir;
  const Result r =
      run("run noise --seed 2025 --shape 16,5,30,52 --out " + dir.file("n.safetensors"));
  ASSERT_EQ(r.code, 0) << r.out;
  auto got = SafetensorsFile::open(dir.file("n.safetensors")).tensor("noise");
  EXPECT_TRUE(all_close(got, SafetensorsFile::open(randn).tensor("seed2025.shape16_5_30_52"), 0, 0,
                        "noise"));
}

TEST(Cli, RunDenoiseMatchesCfgLoop) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(loop, "cfg_loop_tiny.io.safetensors");
  TempDir dir;
  const Result r =
      run("run denoise --weights " + weights + " --in " + loop + " --out " +
          dir.file("d.safetensors") + " --sampler unipc --steps 4 --shift 5 --guide-scale 5");
  ASSERT_EQ(r.code, 0) << r.out;
  auto got = SafetensorsFile::open(dir.file("d.safetensors"));
  auto ref = SafetensorsFile::open(loop);
  for (int i = 0; i < 4; ++i) {
    const std::string k = "step" + std::to_string(i) + ".latent";
    EXPECT_TRUE(all_close(got.tensor(k), ref.tensor(k), 1e-4, 1e-4, k));
  }
  EXPECT_TRUE(
      all_close(got.tensor("final_latent"), ref.tensor("final_latent"), 1e-4, 1e-4, "final"));
}

TEST(Cli, InspectReportsLayoutAndConfig) {
  VIDAX_REQUIRE_FIXTURE(diffusers, "dit_t2v_tiny.diffusers.safetensors");
  const Result r = run("inspect " + diffusers);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("layout:      diffusers"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"dim\":256"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("missing: 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unexpected: 0"), std::string::npos) << r.out;
}

TEST(Cli, BadInputsGiveOneLineErrors) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(io_path, "dit_t2v_tiny.io.safetensors");
  TempDir dir;
  // Missing file.
  expect_one_line_error("inspect " + dir.file("nope.safetensors"), "nope.safetensors");
  // Not a DiT checkpoint (the io file holds inputs, not weights): a generic summary, not an error.
  {
    const Result r = run("inspect " + io_path + " --threads 1");
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("not a Wan model (generic summary)"), std::string::npos) << r.out;
  }
  // Truncated checkpoint.
  {
    std::ifstream in(weights, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(dir.file("cut.safetensors"), std::ios::binary)
        << bytes.substr(0, bytes.size() / 2);
  }
  expect_one_line_error("inspect " + dir.file("cut.safetensors"), "cut.safetensors");
  // Missing tensor / wrong shape, named.
  {
    auto src = SafetensorsFile::open(weights);
    std::vector<std::pair<std::string, Tensor>> ts, wrong;
    for (const auto& e : src.entries()) {
      if (e.name != "blocks.1.ffn.2.bias") ts.emplace_back(e.name, src.tensor(e.name));
      wrong.emplace_back(e.name, e.name == "blocks.0.self_attn.o.weight"
                                     ? Tensor::zeros(Shape{256, 255})
                                     : src.tensor(e.name));
    }
    write_safetensors(dir.file("missing.safetensors"), ts, src.metadata());
    write_safetensors(dir.file("wrong.safetensors"), wrong, src.metadata());
  }
  auto io = SafetensorsFile::open(io_path);
  write_safetensors(
      dir.file("in.safetensors"),
      {{"x", io.tensor("x")}, {"t", io.tensor("call0.t")}, {"context", io.tensor("context")}});
  const std::string in =
      " --in " + dir.file("in.safetensors") + " --out " + dir.file("o.safetensors");
  expect_one_line_error("run dit --weights " + dir.file("missing.safetensors") + in,
                        "blocks.1.ffn.2.bias");
  expect_one_line_error("run dit --weights " + dir.file("wrong.safetensors") + in, "[256, 255]");
  EXPECT_FALSE(std::ifstream(dir.file("o.safetensors")).good()) << "no output after a failure";
  // Wrong input shapes.
  write_safetensors(dir.file("bad_x.safetensors"), {{"x", Tensor::zeros(Shape{16, 3, 5, 6})},
                                                    {"t", io.tensor("call0.t")},
                                                    {"context", io.tensor("context")}});
  expect_one_line_error("run dit --weights " + weights + " --in " + dir.file("bad_x.safetensors") +
                            " --out " + dir.file("o.safetensors"),
                        "patch size");
  write_safetensors(dir.file("bad_ctx.safetensors"), {{"x", io.tensor("x")},
                                                      {"t", io.tensor("call0.t")},
                                                      {"context", Tensor::zeros(Shape{7, 63})}});
  expect_one_line_error("run dit --weights " + weights + " --in " +
                            dir.file("bad_ctx.safetensors") + " --out " + dir.file("o.safetensors"),
                        "context");
  // Bad flags.
  expect_one_line_error("run dit --weights " + weights + in + " --precision fp8", "--precision");
  expect_one_line_error("run noise --seed 1 --shape 3,x --out " + dir.file("n.safetensors"),
                        "--shape");
  expect_one_line_error("bench dit --size 401x240 --no-peak", "--size");
  expect_one_line_error("bench dit --frames 18 --no-peak", "--frames");
  expect_one_line_error("bench dit --model wan9 --no-peak", "--model");
  expect_one_line_error("bench dit --frames 4001 --size 3840x2160 --no-peak", "GiB");
  expect_one_line_error("bench dit --context-tokens -5 --no-peak", "--context-tokens");
  write_safetensors(dir.file("config.json"), {});  // not JSON text at all
  expect_one_line_error(
      "run dit --weights " + weights + " --config " + dir.file("config.json") + in, "config.json");
  expect_one_line_error("run denoise --weights " + weights + " --in " + io_path + " --out " +
                            dir.file("d.safetensors") + " --sampler heun",
                        "noise");
}

TEST(Cli, GuidanceWithoutNegativeContextIsRefused) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(loop, "cfg_loop_tiny.io.safetensors");
  TempDir dir;
  auto io = SafetensorsFile::open(loop);
  write_safetensors(dir.file("in.safetensors"),
                    {{"noise", io.tensor("noise")}, {"context", io.tensor("context")}});
  expect_one_line_error("run denoise --weights " + weights + " --in " + dir.file("in.safetensors") +
                            " --out " + dir.file("d.safetensors") + " --steps 2",
                        "context_null");
  const Result r = run("run denoise --weights " + weights + " --in " + dir.file("in.safetensors") +
                       " --out " + dir.file("d.safetensors") + " --steps 2 --guide-scale 1");
  EXPECT_EQ(r.code, 0) << r.out;
}

TEST(Cli, UnknownSamplerIsNamed) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(loop, "cfg_loop_tiny.io.safetensors");
  TempDir dir;
  expect_one_line_error("run denoise --weights " + weights + " --in " + loop + " --out " +
                            dir.file("d.safetensors") + " --sampler heun --steps 2",
                        "heun");
}

TEST(Cli, BenchDitRunsTinyPresetAsJson) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  const Result r = run("bench dit --weights " + weights +
                       " --frames 5 --size 64x32 --iters 1 --warmup 0 --json --no-peak");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* key :
       {"\"tokens\":16", "seconds_per_forward", "gflops_per_second", "peak_fraction"})
    EXPECT_NE(r.out.find(key), std::string::npos) << key << " in " << r.out;
}

// `vidax bench attention` at a small grid: one JSON object with the fields the sweep reads, the
// window's density from its geometry, and speedup absent without the dense run.
TEST(Cli, BenchAttentionReportsDensityAndTimesAsJson) {
  const std::string small = "bench attention --frames 9 --size 128x64 --heads 2 --head-dim 32 ";
  const Result r = run(small + "--attention window:3,4,4:tile=1,2,2 --repeat 2 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  // Latent grid 3 x 4 x 8 = 96 tokens; the window covers all frames and rows and 4 of 8 columns
  // in 2-column tiles: half of the (query tile, key tile) pairs.
  for (const char* key : {"\"tokens\":96", "\"grid\":[3,4,8]", "\"density\":0.5", "\"repeat\":2",
                          "\"dense_seconds\":", "\"sparse_seconds\":", "\"mask_seconds\":",
                          "\"speedup\":", "\"target_speedup\":1.6"})
    EXPECT_NE(r.out.find(key), std::string::npos) << key << " in " << r.out;
  EXPECT_EQ(r.out.find("\"speedup\":null"), std::string::npos) << r.out;

  const Result no_dense = run(small + "--attention window:3,4,4:tile=1,2,2 --no-dense --json");
  ASSERT_EQ(no_dense.code, 0) << no_dense.out;
  EXPECT_NE(no_dense.out.find("\"speedup\":null"), std::string::npos) << no_dense.out;
  EXPECT_NE(no_dense.out.find("\"dense_seconds\":null"), std::string::npos) << no_dense.out;

  const Result bad = run(small + "--attention window:3,4 --json");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("--attention"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace vidax
