// The built-in suites (fixed, disjoint from training, prompts that say what the analyzer checks)
// and prompt files.
#include "eval/suite.h"

#include <fstream>
#include <set>

#include "core/error.h"
#include "support/test_support.h"

namespace vidax::eval {
namespace {

TEST(Suite, DefaultIs24PromptsTimes2SeedsFromUnseenScenes) {
  const Suite s = builtin_suite("default");
  EXPECT_EQ(s.prompts.size(), 24u);
  EXPECT_EQ(s.seeds, (std::vector<uint64_t>{42, 43}));
  EXPECT_EQ(s.clips(), 48);
  std::set<std::string> texts;
  std::set<int> shapes, motions;
  for (size_t i = 0; i < s.prompts.size(); ++i) {
    const SuitePrompt& p = s.prompts[i];
    ASSERT_TRUE(p.scene_seed && p.expected);
    EXPECT_EQ(*p.scene_seed, kSuiteSceneSeed + i);
    EXPECT_TRUE(*p.scene_seed < kTrainingSceneSeedFirst || *p.scene_seed > kTrainingSceneSeedLast);
    // The prompt is the scene's caption and says exactly the scene's attributes.
    const synth::SceneSpec scene = synth::sample_scene(*p.scene_seed);
    EXPECT_EQ(p.text, synth::caption(scene));
    EXPECT_EQ(*p.expected, synth::attributes(scene));
    EXPECT_EQ(synth::parse_caption(p.text), *p.expected);
    texts.insert(p.text);
    for (const auto& o : p.expected->objects) {
      shapes.insert(static_cast<int>(o.shape));
      motions.insert(static_cast<int>(o.motion));
    }
  }
  EXPECT_EQ(texts.size(), 24u);  // no repeated prompt
  EXPECT_EQ(shapes.size(), 3u);  // every shape appears
  EXPECT_GE(motions.size(), 6u);
}

TEST(Suite, CiIsTheFirstThreePromptsWithOneSeed) {
  const Suite d = builtin_suite("default"), c = builtin_suite("ci");
  ASSERT_EQ(c.prompts.size(), 3u);
  EXPECT_EQ(c.seeds, (std::vector<uint64_t>{42}));
  EXPECT_EQ(c.clips(), 3);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(c.prompts[i].text, d.prompts[i].text);
  EXPECT_THROW(builtin_suite("big"), InputError);
}

TEST(Suite, PromptFileKeepsAttributesOfCaptionsOnly) {
  vidax::testing::TempDir dir;
  const std::string path = dir.file("prompts.txt");
  std::ofstream(path) << "# a comment\n\n"
                      << "a red square moves to the left on a dark blue background\r\n"
                      << "  A cat playing the piano in a jazz club\n";
  const Suite s = prompt_file_suite(path, 3);
  ASSERT_EQ(s.prompts.size(), 2u);
  EXPECT_EQ(s.seeds, (std::vector<uint64_t>{42, 43, 44}));
  EXPECT_EQ(s.prompts[0].text, "a red square moves to the left on a dark blue background");
  ASSERT_TRUE(s.prompts[0].expected);
  EXPECT_EQ(s.prompts[0].expected->objects.size(), 1u);
  EXPECT_FALSE(s.prompts[0].scene_seed);
  EXPECT_EQ(s.prompts[1].text, "A cat playing the piano in a jazz club");
  EXPECT_FALSE(s.prompts[1].expected);
}

TEST(Suite, BadPromptFilesAndSeedCountsAreInputErrors) {
  vidax::testing::TempDir dir;
  std::ofstream(dir.file("empty.txt")) << "# nothing\n\n";
  EXPECT_THROW(prompt_file_suite(dir.file("empty.txt"), 1), InputError);
  EXPECT_THROW(prompt_file_suite(dir.file("missing.txt"), 1), InputError);
  EXPECT_THROW(suite_seeds(0), InputError);
}

}  // namespace
}  // namespace vidax::eval
