// End to end: `vidax calibrate` on the shipped vidax-tiny records a WEST prior from dense
// generations of synthetic captions (seeds >= 8,000,000), and `--attention west:FILE` runs it.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace vidax {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using vidax::testing::TempDir;

std::string tiny() { return std::string(VIDAX_SOURCE_DIR) + "/models/vidax-tiny"; }
const char* kTinyGeometry = " --size 256x256 --frames 17 --negative-prompt '' --precision fp32";

TEST(Calibrate, RecordsAPriorThatWestRuns) {
  if (!fs::exists(tiny() + "/config.json")) GTEST_SKIP() << "no " << tiny();
  TempDir out;
  const auto r = vidax::testing::run_vidax("calibrate --model " + tiny() + kTinyGeometry +
                                           " --synth 1 --steps 1 --grid 2,2,2 --json -o " +
                                           out.file("p.west"));
  ASSERT_EQ(r.code, 0) << r.out;
  // The header: magic, u64 length, JSON naming the model shape and the provenance.
  std::ifstream in(out.file("p.west"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 16u);
  EXPECT_EQ(bytes.substr(0, 8), "VIDAXWST");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data() + 8, 8);
  const json h = json::parse(bytes.substr(16, n));
  EXPECT_EQ(h["layers"], 4);  // vidax-tiny: 4 blocks x 2 heads
  EXPECT_EQ(h["heads"], 2);
  EXPECT_EQ(h["grid"], json::array({2, 2, 2}));
  EXPECT_EQ(h["calibration"]["source"], "synth seeds 8000000..8000000");
  EXPECT_EQ(h["calibration"]["calls"], 4 * 2);  // 4 layers x 2 CFG branches x 1 step
  EXPECT_EQ(bytes.size(), 16 + n + 4 * 2 * 8 * 8 * 4);
  // No scratch videos left behind.
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path()))
    EXPECT_EQ(e.path().filename().string().rfind("vidax-calibrate-", 0), std::string::npos)
        << e.path();
  const auto d = vidax::testing::run_vidax("demo --model " + tiny() +
                                           " --steps 1 --attention west:" + out.file("p.west") +
                                           ":budget=0.2 -o " + out.file("w.mp4"));
  ASSERT_EQ(d.code, 0) << d.out;
  std::ifstream side(out.file("w.mp4.json"));
  const json sidecar = json::parse(side);
  EXPECT_EQ(sidecar["attention"], "west:" + out.file("p.west") + ":budget=0.2");  // as given
  EXPECT_EQ(sidecar["attention_canonical"],
            "west:" + out.file("p.west") + ":budget=0.2,block=2x8x8");
}

TEST(Calibrate, RefusesBadRequests) {
  TempDir out;
  const std::string base = "calibrate --model " + tiny() + " -o " + out.file("p.west");
  vidax::testing::expect_one_line_error(base, "exactly one of --prompts FILE and --synth N");
  vidax::testing::expect_one_line_error(base + " --synth 1 --synth-seed 42",
                                        "never overlap the evaluation suite");
  vidax::testing::expect_one_line_error(base + " --prompts " + out.file("none.txt"), "cannot open");
  vidax::testing::expect_one_line_error(base + " --synth 1 --grid 4,4", "--grid");
  EXPECT_FALSE(fs::exists(out.file("p.west")));
}

}  // namespace
}  // namespace vidax
