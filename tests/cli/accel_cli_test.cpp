// `--accel` through the real binary: the dry-run plan shows MagCache's fixed schedule, a run's
// sidecar and --json report what ran (model calls, block-stack runs, work fraction), TeaCache and
// EasyCache skip work on a real generate, and bad specs end in one line with nothing written.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace vidax {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using vidax::testing::TempDir;
using Result = vidax::testing::CommandResult;
using vidax::testing::expect_one_line_error;
using vidax::testing::run_vidax;

std::string model_dir() {
  static TempDir root;
  const std::string dir = root.file("t2v");
  if (!fs::exists(dir)) {
    const Result r =
        run_vidax("random-model " + dir + " --seed 4 --tokenizer " + std::string(VIDAX_SOURCE_DIR) +
                  "/tests/data/tokenizer/spiece.model");
    EXPECT_EQ(r.code, 0) << r.out;
  }
  return dir;
}

const std::string kArgs = " --prompt 'a red square' --size 64x64 --frames 5 --steps 20 --seed 3";

TEST(AccelCli, DryRunShowsMagCachesFixedSchedule) {
  const Result r = run_vidax("generate --model " + model_dir() + kArgs +
                             " --accel magcache:model=t2v-1.3b --dry-run --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const json accel = json::parse(r.out)["accel"];
  EXPECT_EQ(accel["spec"], "magcache:thresh=0.12,k=2,retention=0.2,model=t2v-1.3b");
  // The published 1.3B table at 20 steps (shared/research/step-methods.md 2.2).
  EXPECT_EQ(accel["schedule_cond"], "CCCCbbCbbCbbCbbCbbCC");
  EXPECT_EQ(accel["block_stack_runs"], 20);
  EXPECT_EQ(accel["dense_calls"], 40);
  EXPECT_LT(accel["work_fraction"].get<double>(), 1.0);
  const Result text = run_vidax("generate --model " + model_dir() + kArgs +
                                " --accel magcache:model=t2v-1.3b --dry-run");
  EXPECT_NE(text.out.find("accel   magcache"), std::string::npos) << text.out;
  // The plan counts what a method keeps: HSA's key/value store of every layer and token.
  auto denoise_bytes = [&](const std::string& accel) {
    const Result p = run_vidax("generate --model " + model_dir() + kArgs +
                               " --sampler euler --dry-run --json" + accel);
    const json plan = json::parse(p.out);  // kept: the loop reads into it
    for (const json& phase : plan["memory"]["phases"])
      if (phase["phase"] == "denoise") return phase["total_bytes"].get<double>();
    return 0.0;
  };
  // 2 branches x 2 layers x 32 tokens x (k + v) x 128 dims x bf16.
  EXPECT_DOUBLE_EQ(denoise_bytes(" --accel hsa") - denoise_bytes(""), 2.0 * 2 * 32 * 2 * 128 * 2);
  // DVG's fixed stages: 64x64 x 5 frames is a [16, 2, 8, 8] latent; space at 0.75 is 6 x 6.
  const Result dvg = run_vidax("generate --model " + model_dir() + kArgs +
                               " --accel dvg:mode=space,switch=0.25 --dry-run --json");
  ASSERT_EQ(dvg.code, 0) << dvg.out;
  const json d = json::parse(dvg.out)["accel"];
  EXPECT_EQ(d["schedule_cond"], "rrrrrCCCCCCCCCCCCCCC");
  EXPECT_EQ(d["details"]["stages"][0]["grid"], json::parse("[2, 6, 6]"));
  EXPECT_EQ(d["details"]["stages"][1]["first_step"], 5);
  EXPECT_LT(d["work_fraction"].get<double>(), 1.0);
  // Methods that decide at run time say so.
  const Result tea = run_vidax("generate --model " + model_dir() + kArgs +
                               " --accel teacache:model=t2v-1.3b --dry-run --json");
  EXPECT_EQ(json::parse(tea.out)["accel"]["schedule"], "decided at run time");
}

TEST(AccelCli, RunsReportWhatTheySkipped) {
  TempDir out;
  for (const char* spec : {"teacache:model=t2v-1.3b,thresh=1000", "easycache:thresh=1,ret=2",
                           "magcache:model=t2v-1.3b"}) {
    const std::string video = out.file(std::string(spec).substr(0, 4) + ".mp4");
    const Result r = run_vidax("generate --model " + model_dir() + kArgs + " --no-hash --accel " +
                               spec + " --json -o " + video);
    ASSERT_EQ(r.code, 0) << spec << "\n" << r.out;
    const json result = json::parse(r.out);
    std::ifstream in(video + ".json");
    const json side = json::parse(in)["accel"];
    EXPECT_EQ(side, result["accel"]) << spec;
    EXPECT_EQ(side["dense_calls"], 40) << spec;
    EXPECT_LT(side["block_stack_runs"].get<int>(), 40) << spec;  // something was skipped
    EXPECT_LT(side["work_fraction"].get<double>(), 1.0) << spec;
    EXPECT_EQ(side["schedule_cond"].get<std::string>().size(), 20u) << spec;
  }
  // HSA: partial steps on the Euler sampler.
  const Result h = run_vidax("generate --model " + model_dir() + kArgs +
                             " --no-hash --sampler euler --accel hsa:budget=0.5 --json -o " +
                             out.file("hsa.mp4"));
  ASSERT_EQ(h.code, 0) << h.out;
  const json hr = json::parse(h.out)["accel"];
  EXPECT_EQ(hr["schedule_cond"], "CCCCCpppCppppppCpppC");  // warmup 5, sync 8 and 15, last
  EXPECT_LT(hr["work_fraction"].get<double>(), 1.0);
  // DVG: the first half on a smaller grid, the sidecar says which.
  const Result g = run_vidax("generate --model " + model_dir() + kArgs +
                             " --no-hash --accel dvg:mode=space --json -o " + out.file("dvg.mp4"));
  ASSERT_EQ(g.code, 0) << g.out;
  const json gr = json::parse(g.out)["accel"];
  EXPECT_EQ(gr["schedule_cond"], "rrrrrrrrrrCCCCCCCCCC");
  EXPECT_EQ(gr["details"]["stages"].size(), 2u);
  EXPECT_LT(gr["work_fraction"].get<double>(), 1.0);
  // Kaleido: reused channel groups from the second step on, counted per layer.
  const Result k = run_vidax("generate --model " + model_dir() + kArgs +
                             " --no-hash --accel kaleido:thresh=2 --json -o " + out.file("k.mp4"));
  ASSERT_EQ(k.code, 0) << k.out;
  const json kr = json::parse(k.out)["accel"];
  EXPECT_EQ(kr["schedule_cond"].get<std::string>().front(), 'C');
  EXPECT_NE(kr["schedule_cond"].get<std::string>().find('k'), std::string::npos) << kr;
  EXPECT_GT(kr["details"]["reused"].get<double>(), 0.0);
  EXPECT_EQ(kr["details"]["layers"].size(), 2u);
  // Without --accel the sidecar says none.
  const Result plain =
      run_vidax("generate --model " + model_dir() + kArgs + " --no-hash -o " + out.file("p.mp4"));
  ASSERT_EQ(plain.code, 0) << plain.out;
  std::ifstream in(out.file("p.mp4.json"));
  EXPECT_EQ(json::parse(in)["accel"]["spec"], "none");
}

TEST(AccelCli, CalibratedMagCacheTableDrivesTheSchedule) {
  TempDir out;
  const Result c =
      run_vidax("calibrate --method magcache --model " + model_dir() +
                " --synth 2 --steps 8 --size 64x64 --frames 5 --json -o " + out.file("t.json"));
  ASSERT_EQ(c.code, 0) << c.out;
  const json table = json::parse(std::ifstream(out.file("t.json")));
  EXPECT_EQ(table["method"], "magcache");
  EXPECT_EQ(table["steps"], 8);
  ASSERT_EQ(table["ratios"].size(), 16u);
  EXPECT_EQ(table["ratios"][0], 1.0);
  EXPECT_EQ(table["provenance"]["prompts"], 2);
  const Result r = run_vidax("generate --model " + model_dir() +
                             " --prompt x --size 64x64 --frames 5 --steps 8 --dry-run --json "
                             "--accel magcache:thresh=1e9,k=2,ratios=" +
                             out.file("t.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  // Two retention steps (20% of 16 calls), then K = 2 skips between runs.
  EXPECT_EQ(json::parse(r.out)["accel"]["schedule_cond"], "CCbbCbbC");
  expect_one_line_error(
      "calibrate --method fastcache --model " + model_dir() + " --synth 1 -o " + out.file("x.json"),
      "--method");
  // TeaCache's fit, used by generate.
  const Result t =
      run_vidax("calibrate --method teacache --model " + model_dir() +
                " --synth 2 --steps 8 --size 64x64 --frames 5 -o " + out.file("tea.json"));
  ASSERT_EQ(t.code, 0) << t.out;
  const json tea = json::parse(std::ifstream(out.file("tea.json")));
  EXPECT_EQ(tea["coefficients"].size(), 5u);
  EXPECT_EQ(tea["points"], 2 * 2 * 7);  // 2 prompts x 2 branches x 7 consecutive pairs
  const Result g = run_vidax("generate --model " + model_dir() +
                             " --prompt x --size 64x64 --frames 5 --steps 8 --no-hash "
                             "--accel teacache:table=" +
                             out.file("tea.json") + " -o " + out.file("v.mp4"));
  EXPECT_EQ(g.code, 0) << g.out;
}

TEST(AccelCli, BadSpecsAreOneLineAndWriteNothing) {
  TempDir out;
  const std::string m = "generate --model " + model_dir() + kArgs + " -o " + out.file("v.mp4");
  expect_one_line_error(m + " --accel turbo", "--accel: unknown method 'turbo'");
  expect_one_line_error(m + " --accel magcache:k=0,model=t2v-1.3b", "k=0");
  expect_one_line_error(m + " --accel teacache:thresh=-2,model=t2v-1.3b", "thresh");
  expect_one_line_error(m + " --accel teacache", "no published coefficients");
  expect_one_line_error(m + " --accel easycache:when=now", "unknown option 'when'");
  expect_one_line_error(m + " --accel hsa", "needs --sampler euler");
  expect_one_line_error(m + " --sampler euler --accel hsa:budget=2", "budget");
  expect_one_line_error(m + " --accel dvg:mode=fast", "mode='fast'");
  expect_one_line_error(m + " --accel dvg:switch=2", "switch");
  expect_one_line_error(m + " --accel kaleido:exec=gpu", "exec='gpu'");
  expect_one_line_error(m + " --accel kaleido:ops=mlp", "unknown linear 'mlp'");
  EXPECT_TRUE(fs::is_empty(out.path()));
}

}  // namespace
}  // namespace vidax
