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
}

}  // namespace
}  // namespace vidax
