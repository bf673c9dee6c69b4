// The fixed prompt x seed suites of `vidax eval`. The built-in suites draw their prompts from
// the synthetic world (synth/synth_world.h): prompt i is caption(sample_scene(7,000,000 + i)),
// scene seeds disjoint from vidax-tiny's training scenes (1,000,000 .. 1,020,000), so the suite
// measures generalisation to unseen captions, and each prompt carries the attributes it asks
// for, which the analyzer checks. Generation (noise) seeds are fixed: 42, 43, ...
//
//   default   24 prompts x 2 seeds = 48 clips
//   ci         3 prompts x 1 seed  =  3 clips (the first three prompts of default)
//
// A prompt file (one prompt per line; blank lines and lines starting with '#' are skipped)
// evaluates other models; a line that parses as a synthetic-world caption keeps its attributes
// (adherence is scored), any other line has none (no adherence: real checkpoints).
//
// Pure functions apart from reading the prompt file; safe to call from any number of threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "synth/synth_world.h"

namespace vidax::eval {

inline constexpr uint64_t kSuiteSceneSeed = 7'000'000;
inline constexpr uint64_t kSuiteNoiseSeed = 42;
// vidax-tiny's training scenes (docs/vidax-tiny.md): the suite must stay out of this range.
inline constexpr uint64_t kTrainingSceneSeedFirst = 1'000'000;
inline constexpr uint64_t kTrainingSceneSeedLast = 1'020'000;

struct SuitePrompt {
  std::string text;
  std::optional<synth::SceneAttributes> expected;  // nullopt: adherence is not scored
  std::optional<uint64_t> scene_seed;              // built-in suites: the scene it came from
};

struct Suite {
  std::string name;  // "default", "ci" or the prompt file's path
  std::vector<SuitePrompt> prompts;
  std::vector<uint64_t> seeds;  // generation seeds; every prompt runs with each
  int64_t clips() const { return static_cast<int64_t>(prompts.size() * seeds.size()); }
};

// "default" or "ci"; InputError naming --suite otherwise.
Suite builtin_suite(const std::string& name);
// Prompts from a file with `seeds` generation seeds (42, 43, ...). InputError naming the file
// when it cannot be read or holds no prompt.
Suite prompt_file_suite(const std::string& path, int seeds);
// The generation seeds 42 .. 42 + count - 1.
std::vector<uint64_t> suite_seeds(int count);

}  // namespace vidax::eval
