// `vidax eval` end to end on the shipped vidax-tiny: the CI suite as JSON (fields and sanity),
// the analyzer on ground truth, a comparison row, prompt files, and one-line errors for bad
// configuration specs and flags.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace vidax {
namespace {

using nlohmann::json;
using vidax::testing::expect_one_line_error;
using vidax::testing::TempDir;
using Result = vidax::testing::CommandResult;

std::string tiny_model() { return std::string(VIDAX_SOURCE_DIR) + "/models/vidax-tiny"; }

#define REQUIRE_TINY()                                         \
  if (!std::filesystem::exists(tiny_model() + "/config.json")) \
    GTEST_SKIP() << "vidax-tiny not found at " << tiny_model();

// stdout only (progress lines go to stderr). One thread: on a loaded 2-core machine two
// OpenMP threads can be many times slower than one.
Result eval_stdout(const std::string& args) {
  std::string command = "(";
  command += VIDAX_BINARY;
  command += " --threads 1 eval ";
  command += args;
  command += " 2>/dev/null)";
  return vidax::testing::run_shell(command);
}

json parse(const Result& r) {
  try {
    return json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not one JSON object: " << e.what() << "\n" << r.out;
    return json::object();
  }
}

void expect_rate(const json& v, const std::string& what) {
  ASSERT_TRUE(v.is_number()) << what << ": " << v;
  EXPECT_GE(v.get<double>(), 0.0) << what;
  EXPECT_LE(v.get<double>(), 1.0) << what;
}

TEST(EvalCli, CiSuiteJsonOnVidaxTiny) {
  REQUIRE_TINY();
  TempDir cache;
  // No --model: vidax-tiny is found as `vidax demo` finds it, at its default settings.
  const Result r = eval_stdout("--suite ci --json --cache " + cache.path());
  ASSERT_EQ(r.code, 0) << r.out;
  const json j = parse(r);
  EXPECT_EQ(j["clips"], 3);
  EXPECT_EQ(j["prompts"], 3);
  expect_rate(j["adherence"], "adherence");
  for (const char* k : {"color", "shape", "motion", "background", "count", "overall"})
    expect_rate(j["adherence_by_attribute"][k], k);
  EXPECT_EQ(j["adherence_clips"], 3);
  // The default configuration is its own reference: no fidelity numbers.
  EXPECT_TRUE(j["same_as_reference"].get<bool>());
  for (const char* k : {"psnr_mean", "psnr_min", "ssim_mean"}) {
    ASSERT_TRUE(j.contains(k)) << k;
    EXPECT_TRUE(j[k].is_null()) << k;
  }
  EXPECT_EQ(j["config"]["canonical"],
            "frames=17,guide=5,precision=fp32,sampler=unipc,shift=5,size=256x256,steps=20,"
            "attention=dense");
  EXPECT_GT(j["seconds_per_step"].get<double>(), 0.0);
  EXPECT_GT(j["seconds_per_clip"].get<double>(), j["seconds_per_step"].get<double>());
  expect_rate(j["attention_share"], "attention_share");
  EXPECT_GT(j["attention_share"].get<double>(), 0.0);
  EXPECT_GE(j["temporal_change"].get<double>(), 0.0);
  ASSERT_EQ(j["per_clip"].size(), 3u);
  for (const json& c : j["per_clip"]) {
    EXPECT_EQ(c["seed"], 42);
    EXPECT_TRUE(c["adherence"].is_object());
    EXPECT_FALSE(c["prompt"].get<std::string>().empty());
  }
}

TEST(EvalCli, GroundTruthIsNearPerfect) {
  const Result r = eval_stdout("--ground-truth --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const json j = parse(r);
  EXPECT_EQ(j["mode"], "ground-truth");
  EXPECT_EQ(j["clips"], 24);
  EXPECT_GE(j["adherence"].get<double>(), 0.95);
  EXPECT_LE(j["adherence"].get<double>(), 1.0);
}

TEST(EvalCli, ComparisonPrintsOneRow) {
  REQUIRE_TINY();
  TempDir cache;
  const std::string small = "size=64x64,frames=5";
  // The reference takes the configuration's size and frames.
  const Result r = eval_stdout("--suite ci --seeds 1 --config " + small +
                               ",steps=2 --against steps=4 --cache " + cache.path());
  ASSERT_EQ(r.code, 0) << r.out;
  // Header, the row, the adherence per attribute.
  EXPECT_EQ(vidax::testing::count_lines(r.out), 3) << r.out;
  EXPECT_EQ(r.out.rfind("config", 0), 0u) << r.out;
  const size_t row = r.out.find('\n') + 1;
  EXPECT_EQ(r.out.compare(row, small.size() + 8, small + ",steps=2"), 0) << r.out;
  // The same comparison as JSON, now served from the cache.
  const json j = parse(eval_stdout("--suite ci --json --config " + small + ",steps=2 --against " +
                                   small + ",steps=4 --cache " + cache.path()));
  EXPECT_FALSE(j["same_as_reference"].get<bool>());
  EXPECT_EQ(j["cache"]["reference_cached"], 3);
  EXPECT_EQ(j["cache"]["reference_generated"], 0);
  ASSERT_TRUE(j["psnr_mean"].is_number()) << j;
  EXPECT_GT(j["psnr_mean"].get<double>(), 5.0);
  EXPECT_GE(j["psnr_mean"].get<double>(), j["psnr_min"].get<double>());
  EXPECT_GT(j["ssim_mean"].get<double>(), 0.0);
  EXPECT_LT(j["ssim_mean"].get<double>(), 1.0);
}

// --attention-metrics: per (layer, step) the relative L2 error of the sparse attention output
// against dense and the attention mass its mask keeps, averaged over the calls (clips x CFG
// branches), and their means.
TEST(EvalCli, AttentionMetricsPerLayerAndStep) {
  REQUIRE_TINY();
  TempDir cache;
  const json j =
      parse(eval_stdout("--suite ci --seeds 1 --json --attention-metrics --cache " + cache.path() +
                        " --config size=64x64,frames=5,steps=2,attention=window:1,2,2:tile=1,2,2"));
  ASSERT_TRUE(j.contains("attention_metrics")) << j;
  const json& m = j["attention_metrics"];
  // 64x64 px, 5 frames: a 2 x 4 x 4 token grid (32 tokens); each query keeps its own 1 x 2 x 2
  // tile, 4 of the 32 keys.
  EXPECT_DOUBLE_EQ(m["density_mean"].get<double>(), 0.125);
  ASSERT_EQ(m["per_layer_step"].size(), 4u * 2u);  // vidax-tiny's 4 layers x 2 steps
  for (const json& c : m["per_layer_step"]) {
    EXPECT_EQ(c["calls"], 3 * 2) << c;  // 3 clips x 2 CFG branches
    EXPECT_DOUBLE_EQ(c["density"].get<double>(), 0.125) << c;
    EXPECT_GT(c["rel_l2"].get<double>(), 0.0) << c;  // a 1/8 mask is not dense
    expect_rate(c["recall"], "recall");
    EXPECT_LT(c["recall"].get<double>(), 1.0) << c;
  }
  EXPECT_GT(m["rel_l2_mean"].get<double>(), 0.0);
  expect_rate(m["recall_mean"], "recall_mean");
}

// --config accel=...: the share of the dense work each clip did, and, against a reference
// generated in the same run (--no-cache), the wall-clock fraction of its denoising.
TEST(EvalCli, StepMethodsReportWorkAndWallClockFractions) {
  REQUIRE_TINY();
  const std::string small = "size=64x64,frames=5,steps=12";
  const json j = parse(eval_stdout("--suite ci --seeds 1 --json --no-cache --config " + small +
                                   ",accel=easycache:thresh=10,ret=2 --against " + small));
  ASSERT_TRUE(j.contains("work_fraction")) << j;
  EXPECT_LT(j["work_fraction"].get<double>(), 0.9) << j;
  ASSERT_TRUE(j["wall_fraction"].is_number()) << j;
  EXPECT_GT(j["wall_fraction"].get<double>(), 0.0);
  ASSERT_EQ(j["per_clip"].size(), j["clips"].get<size_t>());
  for (const json& c : j["per_clip"]) {
    EXPECT_LT(c["model_calls"].get<int>(), 24) << c;
    EXPECT_TRUE(c["reference_denoise_seconds"].is_number()) << c;
  }
  ASSERT_TRUE(j["psnr_mean"].is_number()) << j;  // skipped steps change the frames
  // The readable report says it too.
  const Result text = eval_stdout("--suite ci --seeds 1 --no-cache --config " + small +
                                  ",accel=magcache:model=t2v-1.3b --against " + small);
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("step method magcache:model=t2v-1.3b"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("of the dense work, wall clock"), std::string::npos) << text.out;
}

TEST(EvalCli, CopyOfVidaxTinyGetsItsDefaults) {
  REQUIRE_TINY();
  // A copy outside models/: its config.json names the model, so no --defaults tiny is needed
  // (the Wan 2.1 defaults would ask for 50 steps and the long Wan negative prompt).
  TempDir dir;
  const std::string copy = dir.file("my-tiny");
  std::filesystem::copy(tiny_model(), copy, std::filesystem::copy_options::recursive);
  const Result r = eval_stdout(
      "--model " + copy + " --suite ci --seeds 1 --config size=64x64,frames=5 --no-cache --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const json j = parse(r);
  EXPECT_EQ(j["config"]["canonical"],
            "frames=5,guide=5,precision=fp32,sampler=unipc,shift=5,size=64x64,steps=20,"
            "attention=dense");
  // Without the marker the same folder is treated as a Wan 2.1 model.
  json config = json::parse(std::ifstream(copy + "/config.json"));
  config.erase("vidax_model");
  std::ofstream(copy + "/config.json") << config.dump();
  const json k = parse(eval_stdout("--model " + copy +
                                   " --suite ci --seeds 1 --config size=64x64,frames=5,steps=1"
                                   " --no-cache --json"));
  EXPECT_NE(k["config"]["canonical"].get<std::string>().find("precision=bf16"), std::string::npos)
      << k;
}

TEST(EvalCli, PromptFileWithoutCaptionsHasNoAdherence) {
  REQUIRE_TINY();
  TempDir dir;
  std::ofstream(dir.file("p.txt")) << "a lighthouse at dusk\n";
  const json j = parse(eval_stdout("--prompts " + dir.file("p.txt") +
                                   " --config size=64x64,frames=5,steps=2 --no-cache --json"));
  EXPECT_EQ(j["clips"], 1);
  EXPECT_TRUE(j["adherence"].is_null());
  EXPECT_EQ(j["suite"], dir.file("p.txt"));
}

TEST(EvalCli, BadSpecsAndFlagsAreOneLineErrors) {
  expect_one_line_error("eval --config steps=0", "--config steps");
  expect_one_line_error("eval --config stepz=4", "unknown key 'stepz'");
  expect_one_line_error("eval --against shift=-1", "--against shift");
  expect_one_line_error("eval --config attention=sparse", "attention");
  expect_one_line_error("eval --config accel=turbo", "--config accel");
  expect_one_line_error("eval --config size=256", "--config size");
  expect_one_line_error("eval --config steps=2,steps=3", "given twice");
  expect_one_line_error("eval --config ''", "--config");
  expect_one_line_error("eval --suite huge", "--suite");
  expect_one_line_error("eval --prompts /nonexistent/prompts.txt", "/nonexistent/prompts.txt");
  expect_one_line_error("eval --defaults sd15", "--defaults");
  expect_one_line_error("eval --model /nonexistent/model", "/nonexistent/model");
  if (std::filesystem::exists(tiny_model() + "/config.json")) {
    expect_one_line_error("eval --config frames=9 --against frames=17 --no-cache", "--against");
    expect_one_line_error("eval --config size=250x256 --no-cache", "250");
  }
}

}  // namespace
}  // namespace vidax
