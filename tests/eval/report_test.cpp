// Aggregation and the JSON / table output on hand-made clip results.
#include "eval/report.h"

#include <cmath>
#include <limits>

#include "support/test_support.h"

namespace vidax::eval {
namespace {

synth::AdherenceScore score(bool color, bool shape, bool motion) {
  synth::AdherenceScore s;
  s.color = color, s.shape = shape, s.motion = motion, s.background = true, s.count = true;
  s.overall = color && shape && motion;
  return s;
}

EvalReport two_clips(bool with_reference) {
  EvalReport r;
  r.model_name = "m";
  r.suite_name = "ci";
  r.prompts = 2;
  r.seeds = {42};
  r.config_spec = with_reference ? "steps=10" : "default";
  r.reference_spec = "default";
  r.config = tiny_defaults();
  r.reference = tiny_defaults();
  if (with_reference) r.config.steps = 10;
  r.same_as_reference = !with_reference;
  ClipResult a, b;
  a.prompt = "p1", b.prompt = "p2";
  a.adherence = score(true, true, true);
  b.adherence = score(true, false, false);
  a.temporal = 0.02, b.temporal = 0.04;
  a.seconds_per_step = 1.0, b.seconds_per_step = 3.0;
  a.denoise_seconds = 10, b.denoise_seconds = 30;
  a.attention_seconds = 2, b.attention_seconds = 8;
  a.total_seconds = 12, b.total_seconds = 33;
  if (with_reference) {
    a.psnr = 30, b.psnr = 20;
    a.ssim = 0.9, b.ssim = 0.7;
    a.temporal_reference = 0.01, b.temporal_reference = 0.03;
  }
  r.clips = {a, b};
  return r;
}

TEST(Report, AggregatesMeansWorstCasesAndShares) {
  const Aggregate a = aggregate(two_clips(true));
  EXPECT_EQ(a.clips, 2);
  EXPECT_DOUBLE_EQ(*a.adherence_overall, 0.5);
  EXPECT_EQ(a.adherence.color, 2);
  EXPECT_EQ(a.adherence.shape, 1);
  EXPECT_DOUBLE_EQ(*a.psnr_mean, 25);
  EXPECT_DOUBLE_EQ(*a.psnr_min, 20);
  EXPECT_DOUBLE_EQ(*a.ssim_mean, 0.8);
  EXPECT_DOUBLE_EQ(*a.ssim_min, 0.7);
  EXPECT_DOUBLE_EQ(a.temporal, 0.03);
  EXPECT_DOUBLE_EQ(*a.temporal_reference, 0.02);
  EXPECT_DOUBLE_EQ(a.seconds_per_step, 2.0);
  EXPECT_DOUBLE_EQ(a.seconds_per_step_median, 2.0);
  EXPECT_DOUBLE_EQ(a.seconds_per_clip, 22.5);
  EXPECT_DOUBLE_EQ(*a.attention_share, 0.25);  // (2 + 8) / (10 + 30)
}

TEST(Report, JsonHasTheContractFields) {
  const nlohmann::json j = report_json(two_clips(true));
  for (const char* k : {"adherence", "psnr_mean", "psnr_min", "ssim_mean", "seconds_per_step",
                        "clips", "adherence_by_attribute", "temporal_change",
                        "temporal_change_reference", "attention_share", "per_clip"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["clips"], 2);
  EXPECT_DOUBLE_EQ(j["adherence"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["adherence_by_attribute"]["motion"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["temporal_ratio"].get<double>(), 1.5);
  EXPECT_EQ(j["config"]["spec"], "steps=10");
  EXPECT_EQ(j["per_clip"].size(), 2u);
  EXPECT_EQ(j["per_clip"][1]["adherence"]["shape"], false);
}

TEST(Report, SameConfigurationHasNullFidelity) {
  const nlohmann::json j = report_json(two_clips(false));
  EXPECT_TRUE(j["psnr_mean"].is_null());
  EXPECT_TRUE(j["psnr_min"].is_null());
  EXPECT_TRUE(j["ssim_mean"].is_null());
  EXPECT_TRUE(j["same_as_reference"].get<bool>());
  EXPECT_DOUBLE_EQ(j["temporal_ratio"].get<double>(), 1.0);
  const std::string table = report_table(two_clips(false), false);
  EXPECT_NE(table.find("adherence"), std::string::npos);
  EXPECT_NE(table.find("50.0%"), std::string::npos);
}

TEST(Report, IdenticalClipIsInfiniteInTheTableAndNullInJson) {
  EvalReport r = two_clips(true);
  r.clips[0].psnr = std::numeric_limits<double>::infinity();
  r.clips[0].ssim = 1.0;
  const Aggregate a = aggregate(r);
  EXPECT_TRUE(std::isinf(*a.psnr_mean));
  EXPECT_DOUBLE_EQ(*a.psnr_min, 20);
  EXPECT_EQ(a.identical_clips, 1);
  const nlohmann::json j = report_json(r);
  EXPECT_TRUE(j["psnr_mean"].is_null());
  EXPECT_DOUBLE_EQ(j["psnr_min"].get<double>(), 20);
  EXPECT_TRUE(j["per_clip"][0]["psnr"].is_null());
  EXPECT_TRUE(j["per_clip"][0]["identical_to_reference"].get<bool>());
  EXPECT_NE(report_table(r, true).find("inf"), std::string::npos);
}

TEST(Report, PromptsWithoutAttributesHaveNullAdherence) {
  EvalReport r = two_clips(true);
  for (auto& c : r.clips) c.adherence.reset();
  const nlohmann::json j = report_json(r);
  EXPECT_TRUE(j["adherence"].is_null());
  EXPECT_TRUE(j["adherence_by_attribute"].is_null());
  EXPECT_EQ(j["adherence_clips"], 0);
}

}  // namespace
}  // namespace vidax::eval
