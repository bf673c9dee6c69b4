// `vidax plan` through the real binary: a plan for a preset model on a preset topology (text,
// JSON, the plan file and the rankfile), and every bad input in one line with nothing written.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace vidax {
namespace {

using nlohmann::json;
using vidax::testing::expect_one_line_error;
using vidax::testing::run_vidax;
using vidax::testing::TempDir;

TEST(PlanCli, WritesThePlanTheRankfileAndExplains) {
  TempDir dir;
  const auto r = run_vidax(
      "plan --model wan2.1-t2v-1.3b --topology h100-nvswitch-x8-ib-x2 "
      "--size 832x480 --frames 81 --explain -o " +
      dir.file("p.json") + " --rankfile " + dir.file("ranks"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("predicted step:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("candidates (best first):"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rejected: ulysses x tp = "), std::string::npos) << r.out;
  std::ifstream in(dir.file("p.json"));
  const json j = json::parse(in);
  EXPECT_EQ(j["vidax_plan"], 1);
  EXPECT_EQ(j["topology"]["devices"], 16);
  EXPECT_EQ(j["placement"]["ranks"].size(), 16u);
  EXPECT_GT(j["predicted"]["step_s"].get<double>(), 0);
  EXPECT_GT(j["candidates"].size(), 10u);
  std::ifstream rf(dir.file("ranks"));
  const std::string ranks((std::istreambuf_iterator<char>(rf)), {});
  EXPECT_NE(ranks.find("rank 15=node"), std::string::npos) << ranks;
  const auto js = run_vidax(
      "plan --model wan2.1-t2v-14b --topology tpu-v5e-2x4 --size 1280x720 "
      "--json");
  ASSERT_EQ(js.code, 0) << js.out;
  EXPECT_EQ(json::parse(js.out)["weights"], "sharded");
}

// The whole generation: the phases around the loop in the text and the plan file, the family's
// step count (Wan 2.1 I2V samples 40), the VAE's precision and tiles dealt to every rank.
TEST(PlanCli, PricesTheWholeGeneration) {
  const std::string m =
      "plan --model wan2.1-i2v-14b --topology h100-nvswitch-x8 --size 1280x720 --json "
      "--device-memory 1000 --devices 4 --mesh ulysses=4 --weights sharded ";
  const auto bf16 = run_vidax(m);
  ASSERT_EQ(bf16.code, 0) << bf16.out;
  const json j = json::parse(bf16.out);
  EXPECT_EQ(j["request"]["steps"], 40);
  const json& ph = j["predicted"]["phases"];
  EXPECT_GT(ph["text_s"].get<double>(), 0);
  EXPECT_GT(ph["image_s"].get<double>(), 0);  // CLIP and the conditioning video's encode
  EXPECT_GT(ph["decode_s"].get<double>(), 0);
  EXPECT_EQ(ph["decode_ranks"], 1);
  EXPECT_DOUBLE_EQ(ph["denoise_s"].get<double>(), 40 * j["predicted"]["step_s"].get<double>());
  EXPECT_NEAR(ph["total_s"].get<double>(),
              ph["text_s"].get<double>() + ph["image_s"].get<double>() +
                  ph["denoise_s"].get<double>() + ph["decode_s"].get<double>(),
              1e-9 * ph["total_s"].get<double>());
  // The official VAE's f32: slower than bf16 on a GPU (half the peak).
  const auto fp32 = run_vidax(m + "--vae-precision fp32");
  ASSERT_EQ(fp32.code, 0) << fp32.out;
  const json j32 = json::parse(fp32.out);
  const json& ph32 = j32["predicted"]["phases"];
  EXPECT_EQ(ph32["vae_precision"], "fp32");
  EXPECT_GT(ph32["decode_s"].get<double>(), 1.5 * ph["decode_s"].get<double>());
  // Tiles of 32 latent pixels (overlap 4) over 90 x 160: 4 x 6, dealt to the 4 ranks.
  const auto tiled = run_vidax(m + "--vae-tile 32");
  ASSERT_EQ(tiled.code, 0) << tiled.out;
  const json jt = json::parse(tiled.out);
  const json& pht = jt["predicted"]["phases"];
  EXPECT_EQ(pht["decode_tiles"], 24);
  EXPECT_EQ(pht["decode_ranks"], 4);
  EXPECT_LT(pht["decode_s"].get<double>(), ph["decode_s"].get<double>());
  const auto text = run_vidax(
      "plan --model wan2.1-t2v-1.3b --topology h100-nvswitch-x8 --devices 2 --text-tokens 64");
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("generation: "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("(64 tokens)"), std::string::npos) << text.out;
  // A folder of two experts (Wan 2.2 A14B) samples 40 steps; its own VAE prices the decode.
  TempDir dir;
  const std::string folder = dir.file("experts");
  ASSERT_EQ(run_vidax("random-model " + folder + " --experts --tokenizer " +
                      std::string(VIDAX_SOURCE_DIR) + "/tests/data/tokenizer/spiece.model")
                .code,
            0);
  const auto experts = run_vidax("plan --model " + folder +
                                 " --topology h100-nvswitch-x8 --devices 1 --size 64x64 "
                                 "--frames 5 --json");
  ASSERT_EQ(experts.code, 0) << experts.out;
  const json je = json::parse(experts.out);
  EXPECT_EQ(je["request"]["steps"], 40);
  EXPECT_GT(je["predicted"]["phases"]["decode_s"].get<double>(), 0);
}

TEST(PlanCli, BadInputIsOneLine) {
  TempDir dir;
  const std::string m = "plan --model wan2.1-t2v-14b --size 1280x720 ";
  expect_one_line_error(m + "--topology tpu-v9", "neither a preset nor a topology file");
  expect_one_line_error("plan --model no-such --topology tpu-v5e-2x4", "--model");
  std::ofstream(dir.file("bad.json"))
      << R"({"name":"x","device":{"kind":"x","bf16_tflops":1,"memory_gib":1,"memory_GBps":1},)"
         R"("fabric":{"kind":"torus","dims":[2,2],"wrap":[false],"link_GBps":1}})";
  expect_one_line_error(m + "--topology " + dir.file("bad.json"), "fabric.wrap");
  std::ofstream(dir.file("junk.json")) << "{ not json";
  expect_one_line_error(m + "--topology " + dir.file("junk.json"), "not valid JSON");
  expect_one_line_error(m + "--topology tpu-v5e-2x2 -o " + dir.file("none.json"),
                        "no mesh of 4 devices fits");
  EXPECT_FALSE(std::filesystem::exists(dir.file("none.json")));
  expect_one_line_error(m + "--topology tpu-v5e-2x4 --devices 4", "--devices");
  expect_one_line_error(m + "--topology local", "--devices");
  expect_one_line_error(m + "--topology tpu-v5e-2x4 --frames 80", "--frames");
  expect_one_line_error(m + "--topology tpu-v5e-2x4 --weights streamed", "--weights");
  expect_one_line_error(m + "--topology tpu-v5e-2x4 --attention-density 2", "--attention-density");
  expect_one_line_error(m + "--topology tpu-v5e-2x4 --vae-tile -1", "--vae-tile");
  expect_one_line_error(m + "--topology tpu-v5e-2x4 --text-tokens 513", "--text-tokens");
  expect_one_line_error(m + "--topology tpu-v5e-2x4 --vae-precision fp16", "--vae-precision");
  expect_one_line_error(m + "--topology tpu-v5e-2x4 --steps 0", "--steps");
  expect_one_line_error(m + "--topology tpu-v5e-2x4 --image", "text-to-video model");
}

}  // namespace
}  // namespace vidax
